/*
 * charlm: a GPT trained on any text file, its tokens the bytes, or words or
 * byte-level BPE learnt from the text (--vocab N, --tokenizer, text/vocab.h).
 *
 *     build/charlm --data FILE [--vocab N [--tokenizer bpe]] [--steps N] [--out DIR] ...
 *     build/charlm --tokens DIR [--steps N] [--out DIR] ...
 *
 * Splits the file 90/10 into training and validation text (or trains from
 * the token files DIR/train.tok and DIR/val.tok that build/tokenize wrote,
 * memory-mapped: data/token_file.h), trains with
 * AdamW, or Muon on the hidden matrices and AdamW on the rest (warm-up, cosine
 * or WSD decay, gradient clipping), reports both losses,
 * logs every evaluation to DIR/train.csv, keeps DIR/checkpoint.safetensors
 * (weights, optimizer state, step, RNG) for --resume, and samples text.
 * At every evaluation it also measures every head's detectors on the
 * induction probe (analysis/detectors.h) into DIR/heads.csv and plots loss and
 * induction against step in DIR/heads.png, and the validation loss against
 * the position in the context in DIR/position_loss.csv and .png; at the end it writes
 * DIR/model.safetensors and the head report DIR/report/report.html.
 * Run with --help for every option. Under mpirun (a `make MPI=1` build) each
 * rank trains on its slice of every batch; rank 0 writes and samples.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/detectors.h"
#include "cli/cli.h"
#include "report/head_report.h"
#include "tasks/probe.h"
#include "headlab.h"

#define VAL_WINDOWS_MAX 512 /* the default validation set: this many windows at most */
#define PROBE_SEQUENCES 20 /* the induction probe at each evaluation */
#define TEXT_WINDOWS 16    /* validation windows for the detectors on the text */
#define REPORT_MAP_TOKENS 96 /* the report's maps: this many validation tokens at most */
#define REPORT_TEXT_MAX (1 << 22) /* --tokens: the report's text, the first 4M validation tokens */
/* --data: memory the text takes per byte of the file: the bytes, their
 * tokens (4 bytes each, one per byte at most) and room for the buffer growing
 * and the vocabulary's learning. */
#define DATA_BYTES_IN_MEMORY 8

typedef struct {
    const char *data, *tokens, *out, *resume, *prompt, *init_from;
    const char *schedule, *pos_init, *tokenizer, *pos, *norm, *mlp, *optim, *preset;
    int steps, batch, ctx, d_model, heads, layers, eval_every, sample, threads, seed, warmup;
    int vocab, val_windows, kv_heads, rotary_dims;
    int copy_span;
    double lr, dropout, temperature, clip, emb_std, rope_base, copy_windows, muon_lr, decay_frac;
    double beta1, beta2; /* AdamW's */
    bool no_mlp, no_layernorm, no_report, tie, smear, parallel, no_bias, no_head_bias, zero_init;
    bool ctx_given, muon_lr_given, decay_frac_given, copy_span_given;
    bool model_given, rope_base_given, mlp_given, norm_given; /* flags the user wrote */
    bool emb_std_given, pos_init_given, softcap_given, kv_heads_given, rotary_dims_given;
    bool d_model_given, heads_given, layers_given, dropout_given, vocab_given, seed_given;
    bool qk_norm_given, zero_init_given, doc_windows_given; /* the switches themselves, not
                                                              * the preset's or checkpoint's */
    bool qk_norm, doc_windows; /* the training recipe's options */
    bool no_qk_norm, no_zero_init, no_doc_windows; /* the preset's or a checkpoint's, off */
    double softcap;
} options;

static const hl_usage usage = {
    "usage: charlm (--data FILE | --tokens DIR) [options]\n"
    "Trains a transformer on the text in FILE and samples from it.\n",
    "Exit status: 0 done, 1 training failed (e.g. non-finite loss), 2 bad input or a\n"
    "file that cannot be written (the previous file is kept).\n",
};

/* --preset speedrun: the training recipe of today's small-GPT speedruns
 * (modded-nanogpt) on charlm's model: rotary positions, RMSNorm, QK-norm,
 * a ReLU² MLP, zero-initialised output projections and head, logits
 * soft-capped at 30, Muon on the hidden matrices with AdamW on the rest, a
 * short warm-up, then a stable, decay schedule. AdamW's rate (embeddings,
 * head, gains) is high, 1e-2: those parameters are few and take the largest
 * steps in the speedruns too; its betas are modded-nanogpt's (0.8, 0.95):
 * moments that forget faster. Muon's rate, 0.01, is half modded-nanogpt's
 * 0.02: lower beat higher at d 128 and at d 384. The decay takes the last
 * 0.8 of the steps: with those betas it beat 0.7 on the three texts tried,
 * and 1 on two of them (docs/studies/2026-11-26-speedrun-recipe.md). It
 * sets defaults: flags after it (or before) still override each one.
 * Returns false for an unknown name. */
static bool apply_preset(options *o, const char *name)
{
    if (strcmp(name, "speedrun"))
        return false;
    o->pos = "rope";
    o->norm = "rmsnorm";
    o->mlp = "relu2";
    o->qk_norm = true;
    o->zero_init = true;
    o->softcap = 30;
    o->optim = "muon";
    o->muon_lr = 0.01;
    o->lr = 1e-2;
    o->beta1 = 0.8;
    o->beta2 = 0.95;
    o->warmup = 20;
    o->schedule = "wsd";
    o->decay_frac = 0.8;
    return true;
}

/* The flags the preset leaves in force, later flags' overrides included
 * (--muon-lr and --decay-frac only where they apply: --optim muon, --schedule
 * wsd). */
static void print_preset(const options *o)
{
    printf("preset %s: --pos %s --norm %s --mlp %s%s%s --softcap %g --optim %s", o->preset,
           o->pos, o->norm, o->mlp, o->qk_norm ? " --qk-norm" : "",
           o->zero_init ? " --zero-init" : "", o->softcap, o->optim);
    if (!strcmp(o->optim, "muon"))
        printf(" --muon-lr %g", o->muon_lr);
    printf(" --lr %g --beta1 %g --beta2 %g --warmup %d --schedule %s", o->lr, o->beta1, o->beta2,
           o->warmup, o->schedule);
    if (!strcmp(o->schedule, "wsd"))
        printf(" --decay-frac %g", o->decay_frac);
    printf("\n");
}

/* The optimizer, schedule and data flags of a run, as its checkpoints keep
 * them (their "training" metadata), so that --resume continues with them: T
 * is the run's window (--ctx, shorter than the model's positions only when
 * fine-tuning), copy_span the copied spans' length when --copy-windows. */
static void format_training(const options *o, int T, int copy_span, char *out, size_t size)
{
    int n = snprintf(out, size, "--optim %s --lr %.17g --beta1 %.17g --beta2 %.17g "
                     "--muon-lr %.17g --warmup %d --schedule %s --decay-frac %.17g --clip %.17g "
                     "--batch %d --ctx %d", o->optim, o->lr, o->beta1, o->beta2, o->muon_lr,
                     o->warmup, o->schedule, o->decay_frac, o->clip, o->batch, T);
    if (o->copy_windows > 0 && n > 0 && (size_t)n < size)
        n += snprintf(out + n, size - (size_t)n, " --copy-windows %.17g --copy-span %d",
                      o->copy_windows, copy_span);
    if (o->doc_windows && n > 0 && (size_t)n < size)
        snprintf(out + n, size - (size_t)n, " --doc-windows");
}

/* The flags format_training writes, the only ones read_training takes; all
 * but the last have a value. */
static const char *const training_flags[] = {
    "--optim", "--lr", "--beta1", "--beta2", "--muon-lr", "--warmup", "--schedule", "--decay-frac",
    "--clip", "--batch", "--ctx", "--copy-windows", "--copy-span", "--doc-windows"};
#define N_TRAINING_FLAGS (int)(sizeof training_flags / sizeof training_flags[0])

/* 2 for a training flag with a value, 1 for --doc-windows, 0 for others. */
static int training_flag(const char *arg)
{
    for (int i = 0; i < N_TRAINING_FLAGS; i++)
        if (!strcmp(arg, training_flags[i]))
            return i < N_TRAINING_FLAGS - 1 ? 2 : 1;
    return 0;
}

/* --resume: the checkpoint's optimizer, schedule and data flags, parsed into o by
 * opts, charlm's own table, as defaults that the flags given then override.
 * A checkpoint that cannot be read is left to the model's loading to report,
 * after the flags are checked among themselves; one without the flags (an
 * older headlab's) leaves them to the flags given. Exits 2 when they are not
 * format_training's flags or do not parse. */
static void read_training(const char *path, const hl_opt *opts)
{
    hl_safetensors *f = NULL;
    hl_error err = {0};
    if (hl_safetensors_read_header(path, &f, &err) != HL_OK)
        return;
    const char *saved = hl_safetensors_metadata(f, "training");
    enum { MAX_ARGS = 2 * N_TRAINING_FLAGS };
    static char text[512]; /* the options' names point into it: it outlives the run */
    char *args[MAX_ARGS + 1] = {"charlm"};
    int n = 1;
    bool ok = !saved || strlen(saved) < sizeof text;
    if (saved && ok) {
        strcpy(text, saved);
        char *save = NULL;
        bool value = false; /* the word after a flag that takes one */
        for (char *a = strtok_r(text, " ", &save); a && ok; a = strtok_r(NULL, " ", &save)) {
            const int kind = value ? 0 : training_flag(a);
            ok = n <= MAX_ARGS && (value || kind);
            value = kind == 2;
            if (ok)
                args[n++] = a;
        }
        ok = ok && !value && hl_cli_parse("charlm", opts, 1, n, args, stderr) == HL_CLI_OK;
    }
    if (!ok)
        hl_cli_bad_input("charlm", "%s: its training flags (\"training\" metadata) are not "
                         "charlm's: %.200s", path, saved);
    hl_safetensors_free(f);
}

static options parse_options(int argc, char **argv)
{
    const options defaults = {
        .out = "out/charlm", .prompt = "\n", .steps = 2000, .batch = 16, .ctx = 64,
        .d_model = 128, .heads = 4, .layers = 4, .eval_every = 200, .sample = 400, .lr = 1e-3,
        .temperature = 0.8, .clip = 1.0, .warmup = 100, .schedule = "cosine",
        .pos_init = "normal", .emb_std = 0.02, .pos = "learned", .norm = "layernorm",
        .mlp = "gelu", .rope_base = 10000, .optim = "adamw", .muon_lr = 0.02, .decay_frac = 0.2,
        .beta1 = 0.9, .beta2 = 0.99};
    options o = defaults;
    const hl_opt opts[] = {
        HL_OPTION_TEXT("data", &o.data, "FILE",
                       "training text (any bytes; the first 90% trains, the last 10% validates)"),
        HL_OPTION_TEXT("tokens", &o.tokens, "DIR",
                       "DIR/train.tok and DIR/val.tok, token files of build/tokenize "
                       "(memory-mapped: a corpus larger than memory); the vocabulary is theirs"),
        HL_OPTION_INT("vocab", &o.vocab, 0, HL_VOCAB_MAX, "N",
                      "tokens: 0 = the bytes; N > 256 = the bytes and the N-256 most frequent "
                      "words of the training text, stored with the model (a word is a run of "
                      "letters with the space before it, a run of digits, or one other byte)",
                      .given = &o.vocab_given),
        HL_OPTION_TEXT("tokenizer", &o.tokenizer, "NAME",
                       "bytes, words or bpe: byte-level BPE of N tokens (--vocab N), GPT-2's "
                       "merges learnt from the training text",
                       .dflt = "bytes, or words with --vocab"),
        HL_OPTION_TEXT("out", &o.out, "DIR", "where train.csv and checkpoint.safetensors go"),
        HL_OPTION_TEXT("resume", &o.resume, "CKPT",
                       "continue a run from its checkpoint (the model config comes from the "
                       "checkpoint, and so do --optim, --lr, --beta1, --beta2, --muon-lr, "
                       "--warmup, --schedule, --decay-frac, --clip, --batch, --ctx, "
                       "--copy-windows, --copy-span and --doc-windows unless given; --steps is "
                       "the new total)"),
        HL_OPTION_TEXT("preset", &o.preset, "NAME",
                       "speedrun: the recipe of today's small-GPT speedruns (rope, rmsnorm, "
                       "--qk-norm, --mlp relu2, --zero-init, --softcap 30, --optim muon, "
                       "--muon-lr 0.01, --lr 1e-2, --beta1 0.8, --beta2 0.95, --warmup 20, "
                       "--schedule wsd --decay-frac 0.8), printed at the start; any of those "
                       "flags given overrides it"),
        HL_OPTION_TEXT("init-from", &o.init_from, "DIR",
                       "fine-tune a pretrained model: a Hugging Face folder (GPT-2, Pythia, "
                       "Llama; config.json, model.safetensors and its tokenizer) or a headlab "
                       "model file; its architecture and vocabulary, windows of --ctx tokens if "
                       "given (at most its positions, else all of them)"),
        HL_OPTION_INT("steps", &o.steps, 0, 1e8, "N", "training steps"),
        HL_OPTION_INT("batch", &o.batch, 1, 4096, "N", "sequences per step"),
        HL_OPTION_INT("ctx", &o.ctx, 2, 4096, "N", "context length", .given = &o.ctx_given),
        HL_OPTION_INT("d-model", &o.d_model, 1, 8192, "N", "width", .given = &o.d_model_given),
        HL_OPTION_INT("heads", &o.heads, 1, 256, "N", "attention heads",
                      .given = &o.heads_given),
        HL_OPTION_INT("layers", &o.layers, 1, HL_GPT_MAX_LAYERS, "N", "blocks",
                      .given = &o.layers_given),
        HL_OPTION_TEXT("pos", &o.pos, "NAME",
                       "positions: learned, sinusoidal (fixed, of RMS --emb-std), rope "
                       "(rotary, rotate-half, on q and k) or none",
                       .given = &o.model_given),
        HL_OPTION_REAL("rope-base", &o.rope_base, 1.001, 1e12, "X", "the rotary base",
                       .given = &o.rope_base_given),
        HL_OPTION_TEXT("norm", &o.norm, "NAME", "layernorm, rmsnorm or none",
                       .given = &o.norm_given),
        HL_OPTION_TEXT("mlp", &o.mlp, "NAME",
                       "gelu (4x wide), gelu_tanh (GELU's tanh approximation, GPT-2's "
                       "gelu_new), swiglu (8/3 x wide, rounded up to a multiple of 16), relu2 "
                       "(relu(x)^2, 4x wide) or none (attention only)",
                       .given = &o.mlp_given),
        HL_OPTION_FLAG("qk-norm", &o.qk_norm,
                       "RMSNorm of every head's q and k before rotation, with a learned gain "
                       "per layer (QK-norm)", .given = &o.qk_norm_given),
        HL_OPTION_FLAG("no-qk-norm", &o.no_qk_norm, "without QK-norm (over --preset's)"),
        HL_OPTION_REAL("softcap", &o.softcap, 0, 1e6, "C",
                       "the loss reads C*tanh(logits/C): logit soft-capping (0: off)",
                       .given = &o.softcap_given),
        HL_OPTION_FLAG("doc-windows", &o.doc_windows,
                       "training windows start where a document does, and attention never "
                       "crosses a document boundary inside one (documents: the token files' "
                       "index, or for --data the lines holding only a form feed)",
                       .given = &o.doc_windows_given),
        HL_OPTION_FLAG("no-doc-windows", &o.no_doc_windows,
                       "windows anywhere (over a resumed checkpoint's --doc-windows)"),
        HL_OPTION_INT("kv-heads", &o.kv_heads, 0, 256, "N",
                      "key/value heads, dividing --heads: grouped-query attention (0: one per "
                      "head)", .given = &o.kv_heads_given),
        HL_OPTION_INT("rotary-dims", &o.rotary_dims, 0, 8192, "N",
                      "with --pos rope: rotate only the first N (even) dims of each head, as "
                      "GPT-NeoX (0: all)", .given = &o.rotary_dims_given),
        HL_OPTION_FLAG("parallel", &o.parallel,
                       "parallel residual: attention and MLP both read the block's input "
                       "(GPT-NeoX)"),
        HL_OPTION_FLAG("no-bias", &o.no_bias, "the attention and MLP linears without bias (Llama)"),
        HL_OPTION_FLAG("no-head-bias", &o.no_head_bias,
                       "the output head without bias (GPT-2, GPT-NeoX, Llama: needed to export "
                       "the model with heads export)"),
        HL_OPTION_FLAG("no-mlp", &o.no_mlp, "the same as --mlp none"),
        HL_OPTION_FLAG("no-layernorm", &o.no_layernorm, "the same as --norm none"),
        HL_OPTION_FLAG("tie", &o.tie, "the output head shares the token embedding's weights"),
        HL_OPTION_FLAG("smear", &o.smear,
                       "smeared keys: each head mixes every key with the one before by a "
                       "learned weight (Olsson et al. 2022)"),
        HL_OPTION_FLAG("no-report", &o.no_report, "skip the head report at the end (DIR/report/)"),
        HL_OPTION_REAL("emb-std", &o.emb_std, 1e-6, 100, "X",
                       "token and position embeddings start as N(0, X)",
                       .given = &o.emb_std_given),
        HL_OPTION_TEXT("pos-init", &o.pos_init, "NAME",
                       "learned positions at the start: normal or sinusoidal (Vaswani et al.'s, "
                       "of RMS --emb-std)", .given = &o.pos_init_given),
        HL_OPTION_FLAG("zero-init", &o.zero_init,
                       "start every block's attention out_proj and MLP proj weights and the head "
                       "weight (unless tied) at zero", .given = &o.zero_init_given),
        HL_OPTION_FLAG("no-zero-init", &o.no_zero_init,
                       "the usual initialisation of those weights (over --preset's)"),
        HL_OPTION_TEXT("optim", &o.optim, "NAME",
                       "adamw or muon: Muon on the hidden matrices (attention q, k, v, out_proj, "
                       "MLP fc, proj), AdamW on the rest"),
        HL_OPTION_REAL("lr", &o.lr, 0, 10, "X", "peak learning rate of AdamW"),
        HL_OPTION_REAL("beta1", &o.beta1, 0, 0.99999, "X",
                       "AdamW's decay of its running mean of the gradient (PyTorch's betas[0])"),
        HL_OPTION_REAL("beta2", &o.beta2, 0, 0.99999, "X",
                       "AdamW's decay of its running mean of the squared gradient (betas[1])"),
        HL_OPTION_REAL("muon-lr", &o.muon_lr, 0, 10, "X", "peak learning rate of Muon's group",
                       .given = &o.muon_lr_given),
        HL_OPTION_REAL("dropout", &o.dropout, 0, 0.99, "X",
                       "dropout on the embeddings and on the outputs of attention and the MLP",
                       .given = &o.dropout_given),
        HL_OPTION_INT("warmup", &o.warmup, 0, 1e8, "N", "steps of linear warm-up"),
        HL_OPTION_TEXT("schedule", &o.schedule, "NAME",
                       "after warm-up: cosine (down toward 0.1 of the peak, reached one "
                       "step past the last), constant, or wsd (constant, then linear decay "
                       "toward 0 over the last --decay-frac of the steps)"),
        HL_OPTION_REAL("decay-frac", &o.decay_frac, 1e-6, 1, "F",
                       "the decay's share of the steps with --schedule wsd",
                       .given = &o.decay_frac_given),
        HL_OPTION_REAL("clip", &o.clip, 0, 1e9, "X", "gradient-norm clip, 0 = off"),
        HL_OPTION_REAL("copy-windows", &o.copy_windows, 0, 1, "F",
                       "a training-data intervention: in this fraction of the training windows "
                       "a span of the window recurs later in it (copied over what followed); "
                       "validation text is never changed"),
        HL_OPTION_INT("copy-span", &o.copy_span, 1, 4096, "N",
                      "the copied span's length in tokens, at most (ctx+1)/2", .dflt = "ctx/4",
                      .given = &o.copy_span_given),
        HL_OPTION_INT("eval-every", &o.eval_every, 1, 1e8, "N", "validation interval"),
        HL_OPTION_INT("seed", &o.seed, 0, 1 << 30, "N",
                      "seed of the initial weights, the batches, dropout and the sampling",
                      .given = &o.seed_given),
        HL_OPTION_INT("val-windows", &o.val_windows, 0, 1 << 20, "N",
                      "validation windows of ctx+1 tokens, evenly spread (0: as many as the "
                      "validation text holds apart, at most 512)"),
        HL_OPTION_INT("sample", &o.sample, 0, 1000000, "N", "tokens to sample at the end"),
        HL_OPTION_REAL("temperature", &o.temperature, 1e-3, 100, "X", "sampling temperature"),
        HL_OPTION_TEXT("prompt", &o.prompt, "TEXT", "the text sampling starts from",
                       .dflt = "a newline"),
        HL_OPTION_INT("threads", &o.threads, 1, HL_CLI_MAX_THREADS, "N",
                      "OpenMP threads; without it OMP_NUM_THREADS, else each step takes 1, 2, "
                      "4.. cores, whichever its timed steps ran fastest",
                      .dflt = "tuned"),
        {0},
    };
    hl_cli_parse_or_exit("charlm", &usage, opts, argc, argv);
    /* Defaults in layers, each overriding the one before: charlm's, a
     * preset's, a resumed run's training flags, then the flags given,
     * wherever they stand and however they are written (--preset=NAME, --pre
     * NAME). The first parse finds the preset and the checkpoint; the second
     * reads every flag over them. */
    if (o.preset || o.resume) {
        const char *preset = o.preset, *resume = o.resume;
        o = defaults;
        if (preset && !apply_preset(&o, preset))
            hl_cli_bad_input("charlm", "unknown --preset %s (speedrun)", preset);
        if (resume)
            read_training(resume, opts);
        /* the checkpoint's are not given */
        o.muon_lr_given = o.decay_frac_given = o.copy_span_given = o.doc_windows_given = false;
        hl_cli_parse_or_exit("charlm", &usage, opts, argc, argv);
    }
    /* The off flags win over the preset's on; against a flag given, refused. */
    const char *both = o.qk_norm_given && o.no_qk_norm       ? "qk-norm"
                       : o.zero_init_given && o.no_zero_init ? "zero-init"
                       : o.doc_windows_given && o.no_doc_windows ? "doc-windows"
                                                                 : NULL;
    if (both)
        hl_cli_bad_input("charlm", "--%s and --no-%s: give one", both, both);
    if ((o.resume || o.init_from) && (o.no_qk_norm || o.no_zero_init))
        hl_cli_bad_input("charlm", "--no-qk-norm or --no-zero-init with %s: the model comes "
                         "from %s", o.resume ? "--resume" : "--init-from",
                         o.resume ? "the checkpoint" : "the pretrained model");
    if (o.no_qk_norm)
        o.qk_norm = false;
    if (o.no_zero_init)
        o.zero_init = false;
    if (o.no_doc_windows) /* over a checkpoint's --doc-windows too */
        o.doc_windows = false;
    if (o.preset && (o.resume || o.init_from))
        hl_cli_bad_input("charlm", "--preset with %s: the model and its training come from %s",
                         o.resume ? "--resume" : "--init-from",
                         o.resume ? "the checkpoint" : "the pretrained model");
    if (o.data && o.tokens)
        hl_cli_bad_input("charlm", "--data and --tokens: give one");
    if (!o.data && !o.tokens)
        hl_cli_bad_input("charlm", "one of --data FILE or --tokens DIR is required (see --help)");
    if (o.tokens && (o.vocab_given || o.tokenizer))
        hl_cli_bad_input("charlm", "--vocab or --tokenizer with --tokens: the vocabulary comes "
                         "from the token files");
    if (strcmp(o.schedule, "cosine") && strcmp(o.schedule, "constant") && strcmp(o.schedule, "wsd"))
        hl_cli_bad_input("charlm", "unknown --schedule %s (cosine, constant or wsd)", o.schedule);
    if (o.decay_frac_given && strcmp(o.schedule, "wsd"))
        hl_cli_bad_input("charlm", "--decay-frac belongs to --schedule wsd (--schedule is %s)",
                         o.schedule);
    if (strcmp(o.optim, "adamw") && strcmp(o.optim, "muon"))
        hl_cli_bad_input("charlm", "unknown --optim %s (adamw or muon)", o.optim);
    if (o.muon_lr_given && strcmp(o.optim, "muon"))
        hl_cli_bad_input("charlm", "--muon-lr belongs to --optim muon (--optim is %s)", o.optim);
    if ((o.zero_init || o.emb_std_given || o.pos_init_given) && (o.resume || o.init_from))
        hl_cli_bad_input("charlm", "--%s starts new weights; %s brings its own",
                         o.zero_init ? "zero-init" : o.emb_std_given ? "emb-std" : "pos-init",
                         o.resume ? "--resume" : "--init-from");
    if (strcmp(o.pos_init, "normal") && strcmp(o.pos_init, "sinusoidal"))
        hl_cli_bad_input("charlm", "unknown --pos-init %s (normal or sinusoidal)", o.pos_init);
    if (hl_gpt_pos_parse(o.pos) < 0)
        hl_cli_bad_input("charlm", "unknown --pos %s (learned, sinusoidal, rope or none)", o.pos);
    if (hl_gpt_norm_parse(o.norm) < 0)
        hl_cli_bad_input("charlm", "unknown --norm %s (layernorm, rmsnorm or none)", o.norm);
    if (hl_gpt_mlp_parse(o.mlp) < 0)
        hl_cli_bad_input("charlm", "unknown --mlp %s (gelu, gelu_tanh, swiglu, relu2 or none)",
                         o.mlp);
    if (o.no_mlp && o.mlp_given && strcmp(o.mlp, "none"))
        hl_cli_bad_input("charlm", "--no-mlp with --mlp %s", o.mlp);
    if (o.no_layernorm && o.norm_given && strcmp(o.norm, "none"))
        hl_cli_bad_input("charlm", "--no-layernorm with --norm %s", o.norm);
    /* (A checkpoint's or a pretrained model's positions are its own: the
     * refusal below says so, whatever --pos says.) */
    if (o.rope_base_given && strcmp(o.pos, "rope") && !o.resume && !o.init_from)
        hl_cli_bad_input("charlm", "--rope-base belongs to --pos rope (--pos is %s)", o.pos);
    const bool architecture = o.model_given || o.norm_given || o.mlp_given ||
                              o.rope_base_given || o.tie || o.smear || o.no_mlp ||
                              o.no_layernorm || o.kv_heads_given || o.rotary_dims_given ||
                              o.parallel || o.no_bias || o.no_head_bias;
    if ((o.resume || o.init_from) && architecture)
        hl_cli_bad_input("charlm", "--pos, --norm, --mlp, --rope-base, --tie, --smear, --no-mlp, "
                         "--no-layernorm, --kv-heads, --rotary-dims, --parallel, --no-bias and "
                         "--no-head-bias with %s: the model comes from %s",
                         o.resume ? "--resume" : "--init-from",
                         o.resume ? "the checkpoint" : "the pretrained model");
    if ((o.resume || o.init_from) && (o.qk_norm || o.softcap_given))
        hl_cli_bad_input("charlm", "--qk-norm or --softcap with %s: the model comes from %s",
                         o.resume ? "--resume" : "--init-from",
                         o.resume ? "the checkpoint" : "the pretrained model");
    if (o.resume && o.init_from)
        hl_cli_bad_input("charlm", "--init-from starts a run; --resume continues one: give one");
    if (o.init_from && (o.vocab_given || o.tokenizer))
        hl_cli_bad_input("charlm", "--vocab or --tokenizer with --init-from: the vocabulary is "
                         "the pretrained model's");
    if (o.rotary_dims && strcmp(o.pos, "rope"))
        hl_cli_bad_input("charlm", "--rotary-dims belongs to --pos rope (--pos is %s)", o.pos);
    if (o.no_mlp)
        o.mlp = "none";
    if (o.no_layernorm)
        o.norm = "none";
    if (strcmp(o.pos_init, "normal") && strcmp(o.pos, "learned"))
        hl_cli_bad_input("charlm", "--pos-init %s starts learned positions; --pos is %s",
                         o.pos_init, o.pos);
    if (o.vocab > 0 && o.vocab <= HL_VOCAB_BYTES)
        hl_cli_bad_input("charlm", "--vocab %d: 0 for the bytes, or more than %d for learnt words",
                         o.vocab, HL_VOCAB_BYTES);
    if (o.tokenizer && strcmp(o.tokenizer, "bytes") && strcmp(o.tokenizer, "words") &&
        strcmp(o.tokenizer, "bpe"))
        hl_cli_bad_input("charlm", "unknown --tokenizer %s (bytes, words or bpe)", o.tokenizer);
    if (o.tokenizer && !strcmp(o.tokenizer, "bytes") && o.vocab)
        hl_cli_bad_input("charlm", "--tokenizer bytes with --vocab %d: the bytes are 256 tokens",
                         o.vocab);
    if (o.tokenizer && o.resume)
        hl_cli_bad_input("charlm", "--tokenizer with --resume: the vocabulary comes from the "
                         "checkpoint");
    if (o.tokenizer && strcmp(o.tokenizer, "bytes") && !o.vocab)
        hl_cli_bad_input("charlm", "--tokenizer %s needs --vocab N, N > %d", o.tokenizer,
                         HL_VOCAB_BYTES);
    if (o.copy_span_given && !o.copy_windows)
        hl_cli_bad_input("charlm", "--copy-span without --copy-windows F, F > 0");
    if (o.sample && !*o.prompt)
        hl_cli_bad_input("charlm", "--prompt is empty: sampling starts from one token at least "
                         "(or give --sample 0)");
    if (o.vocab_given && o.resume)
        hl_cli_bad_input("charlm", "--vocab with --resume: the vocabulary comes from the "
                         "checkpoint");
    return o;
}

/* ---- the text ---- */

/* Tokens in memory (--data), or a memory-mapped token file (--tokens). */
typedef struct {
    const int32_t *tokens;
    size_t size;
    const hl_token_file *file;
} text_span;

/* Tokens at..at+n-1 of a text span (an hl_text_read_fn). */
static hl_status span_read(void *ctx, size_t at, size_t n, int32_t *out, hl_error *err)
{
    const text_span *s = ctx;
    if (s->file)
        return hl_token_file_read(s->file, at, n, out, err);
    memcpy(out, s->tokens + at, sizeof *out * n);
    return HL_OK;
}

/* B windows of T+1 tokens starting at the given offsets -> inputs and
 * targets, with their copies applied. */
static hl_status make_batch(text_span s, const size_t *offsets, const hl_window_copy *copies,
                            int B, int T, int32_t *x, int32_t *y, hl_error *err)
{
    for (int b = 0; b < B; b++) {
        int32_t *in = x + (size_t)b * T, *next = y + (size_t)b * T;
        if (span_read(&s, offsets[b], (size_t)T, in, err) != HL_OK ||
            span_read(&s, offsets[b] + (size_t)T, 1, next + T - 1, err) != HL_OK)
            return err->status;
        memcpy(next, in + 1, sizeof *next * (size_t)(T - 1));
        hl_window_copy_apply(in, next, T, copies[b]);
    }
    return HL_OK;
}

/* The validation set: --val-windows evenly spread windows of the validation
 * text, by default as many as it holds without overlap, up to
 * VAL_WINDOWS_MAX (the ICL score is a difference of two means over positions:
 * 64 windows left it +-0.1 nats of noise). */
static hl_eval_set *validation_set(text_span val, int windows, int B, int T, hl_error *err)
{
    const size_t fit = val.size / ((size_t)T + 1);
    const int n = windows ? windows : fit > VAL_WINDOWS_MAX ? VAL_WINDOWS_MAX : fit ? (int)fit : 1;
    return hl_eval_text_windows_read(span_read, &val, val.size, n, T, B, err);
}

/* ---- training ---- */

/* What heads.png draws against the step, one point per evaluation. */
enum { CURVE_TRAIN, CURVE_VAL, CURVE_ICL, CURVE_ICL_BYTE, CURVE_INDUCTION, CURVE_INDUCTION_TEXT,
       CURVE_PREVIOUS,
       CURVES };

typedef struct {
    options o;
    bool lead;              /* rank 0 alone prints and writes */
    hl_vocab *vocab;        /* the bytes, or learnt from the training text */
    hl_hf_token_ids token_ids; /* a fine-tuned model's special tokens, kept for export */
    size_t size;            /* bytes in the file */
    int32_t *tokens[2];     /* the training and the validation text, encoded */
    hl_token_file *files[2]; /* or their token files (--tokens) */
    char tokens_meta[8600]; /* the token files' paths and fingerprints, for checkpoints */
    text_span train, val;
    hl_eval_set *val_set;
    hl_gpt *m;
    hl_optim *opt;
    hl_graph *g;
    int B, T;
    int32_t *x, *y;         /* this rank's rows of the step's batch */
    size_t *offsets;        /* the global batch's windows */
    hl_window_copy *copies; /* and the spans recurring in them (--copy-windows) */
    uint64_t *doc_starts;   /* --doc-windows: the training text's documents */
    size_t n_docs, doc_windows; /* and how many of them start a whole window */
    hl_tensor *doc_ids;     /* (rows,T): this rank's windows' document ids */
    int copy_span;          /* the copied spans' length; 0: no copies */
    int rows;               /* this rank's share of the batch */
    hl_rng data_rng;        /* the same on every rank */
    hl_rng *rank_dropout;   /* under MPI, on rank 0: every rank's dropout stream,
                               gathered before each evaluation for the checkpoint */
    bool batch_failed;      /* the last batch could not be read */
    int64_t start;
    int64_t saved_step;     /* the last checkpoint this run wrote; 0: none yet */
    hl_lr_schedule schedule;
    double t0;              /* train.csv's seconds count from it: when training started,
                               less a resumed run's seconds before */
    double seconds_before;  /* a resumed run's seconds at its checkpoint, read back */
    hl_thread_tuner tuner;  /* each step's thread count, unless the user fixed it */
    FILE *log;
    char config[512];
    char training[512]; /* the optimizer, schedule and data flags (format_training) */
    hl_probe probe;         /* random letters or words repeated once: the detectors */
    FILE *heads_log;        /* heads.csv */
    hl_eval_set *text_set;  /* validation windows: the detectors on the text itself */
    double *position_loss;  /* the last evaluation's validation loss per position */
    double *position_bytes; /* (T) bytes of the validation targets at each position */
    int n_points;           /* evaluations for heads.png (a resumed run's earlier ones too) */
    double *at_step, *curve[CURVES];
} run;

/* This rank's loss (an hl_loss_fn), weighted by its share of the rows. */
static hl_tensor *shard_loss(hl_graph *g, void *ctx)
{
    const run *r = ctx;
    hl_tensor *logits = hl_gpt_forward(g, r->m, r->x, r->rows, r->T,
                                       r->doc_ids ? &(hl_gpt_run){.doc_ids = r->doc_ids} : NULL);
    hl_tensor *loss = hl_gpt_loss(g, r->m, logits, r->y, -1);
    return hl_scale(g, loss, (hl_real)r->rows / (hl_real)r->B);
}

/* Every rank draws the whole global batch (one RNG stream for all), then
 * keeps its slice (an hl_run_hooks batch). */
static hl_status next_batch(void *ctx, int64_t step, hl_error *err)
{
    (void)step;
    run *r = ctx;
    for (int b = 0; b < r->B; b++) {
        /* 53 bits in either build: a float build's 24 would reach only 2^24
         * of a longer text's window starts */
        const double u = (double)(hl_rng_next(&r->data_rng) >> 11) * 0x1.0p-53;
        /* A window is T + 1 tokens: it starts anywhere in 0..size-T-1. */
        r->offsets[b] = r->doc_starts ? (size_t)r->doc_starts[hl_docs_draw(r->doc_windows, u)]
                                      : (size_t)(u * (double)(r->train.size - (size_t)r->T));
        /* Nothing drawn without copies: such a run reads the windows it
         * read before the option existed. */
        r->copies[b] =
            hl_window_copy_draw(&r->data_rng, r->T + 1, r->copy_span, r->o.copy_windows);
    }
    int begin, end;
    hl_dist_shard(r->B, &begin, &end);
    r->rows = end - begin;
    r->batch_failed = make_batch(r->train, r->offsets + begin, r->copies + begin, r->rows, r->T,
                                 r->x, r->y, err) != HL_OK;
    if (r->doc_starts) {
        if (!r->doc_ids && !(r->doc_ids = hl_tensor_new("doc_ids", 2, (int[]){r->rows, r->T},
                                                        false)))
            return hl_error_set(err, HL_ERR_NOMEM, "charlm: out of memory");
        for (int b = 0; b < r->rows; b++)
            hl_docs_ids(r->doc_starts, r->n_docs, r->offsets[begin + b], r->T,
                        r->doc_ids->data + (size_t)b * r->T);
    }
    return r->batch_failed ? err->status : HL_OK;
}

/* Every rank's dropout stream to rank 0 (train/run.h's gather hook). */
static void gather_dropout(void *ctx)
{
    run *r = ctx;
    hl_dist_gather(&r->g->rng, (int)sizeof r->g->rng, r->rank_dropout);
}

/* Room for "dropout.rank<r>", any int r. */
#define RANK_RNG_NAME_MAX 24

/* The RNG streams a checkpoint keeps: the batches', this process's dropout
 * stream as "dropout" (rank 0's under MPI) and, under MPI, each other rank's
 * as "dropout.rank<r>", so that a resumed run draws every rank's masks as the
 * uninterrupted one would. rngs holds ranks + 1 entries, names ranks. */
static int checkpoint_rngs(run *r, hl_checkpoint_rng *rngs, char (*names)[RANK_RNG_NAME_MAX])
{
    const int ranks = r->rank_dropout ? hl_dist_size() : 1;
    rngs[0] = (hl_checkpoint_rng){"data", &r->data_rng, NULL};
    rngs[1] = (hl_checkpoint_rng){"dropout", &r->g->rng, NULL};
    for (int k = 1; k < ranks; k++) {
        snprintf(names[k], sizeof names[k], "dropout.rank%d", k);
        rngs[k + 1] = (hl_checkpoint_rng){names[k], &r->rank_dropout[k], NULL};
    }
    return ranks + 1;
}

static hl_status save_checkpoint(run *r, int64_t step, hl_error *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", r->o.out);
    const size_t ranks = (size_t)hl_dist_size();
    hl_checkpoint_rng *rngs = malloc(sizeof *rngs * (ranks + 1));
    char(*names)[RANK_RNG_NAME_MAX] = malloc(sizeof *names * ranks);
    bool failed, failed_ids;
    char *vocab = hl_gpt_meta_format_vocab(r->vocab, &failed);
    char *ids = hl_gpt_meta_format_token_ids(&r->token_ids, &failed_ids);
    if (failed || failed_ids || !rngs || !names) {
        free(rngs);
        free(names);
        free(vocab);
        free(ids);
        return hl_error_set(err, HL_ERR_NOMEM, "checkpoint: out of memory");
    }
    const int n_rngs = checkpoint_rngs(r, rngs, names);
    /* A pruned model's record: without it the file would not load. */
    hl_head_set pruned;
    hl_gpt_pruned_heads(r->m, &pruned);
    char pruned_text[8192];
    const int pruned_len = hl_pruned_heads_format(&pruned, &r->m->cfg, pruned_text,
                                                  sizeof pruned_text);
    hl_checkpoint_meta meta[7] = {{"config", r->config}, {"task", "charlm"},
                                  {"training", r->training}, {"pruned_heads", pruned_text}};
    int n_meta = 4;
    if (pruned_len < 0 || (size_t)pruned_len >= sizeof pruned_text) {
        free(rngs);
        free(names);
        free(vocab);
        free(ids);
        return hl_error_set(err, HL_ERR_ARG, "checkpoint: the pruning record is too long");
    }
    if (r->files[0])
        meta[n_meta++] = (hl_checkpoint_meta){"tokens", r->tokens_meta};
    if (vocab)
        meta[n_meta++] = (hl_checkpoint_meta){"vocab", vocab};
    if (ids)
        meta[n_meta++] = (hl_checkpoint_meta){"hf_token_ids", ids};
    hl_status st = hl_checkpoint_save(path, r->m->params, r->opt, step, rngs, n_rngs, meta,
                                      n_meta, err);
    free(rngs);
    free(names);
    free(vocab);
    free(ids);
    return st;
}

/* ---- heads over training ---- */

/* A picture the plot refused (values past what an axis can show, e.g. a
 * loss past 1e308 in the double build) costs a note, not the run; a file
 * that cannot be written stops it. */
static hl_status picture_or_note(hl_status s, const char *name, hl_error *err)
{
    if (s != HL_ERR_ARG)
        return s;
    printf("note: %s not drawn: %s\n", name, err->message);
    *err = (hl_error){0};
    return HL_OK;
}

/* heads.png: the phase change on one step axis — loss, the in-context-learning
 * score, and the best induction (probe and text; layers 1..) and previous-token
 * (layer 0) scores. */
static hl_status plot_heads(const run *r, hl_error *err)
{
    const int n = r->n_points;
    const double *x = r->at_step;
    hl_plot_series loss[] = {{"train", x, r->curve[CURVE_TRAIN], n},
                             {"validation", x, r->curve[CURVE_VAL], n}};
    const bool words = hl_vocab_size(r->vocab) > HL_VOCAB_BYTES;
    hl_plot_series icl[] = {{words ? "ICL score (nats/token)" : "validation ICL score", x,
                             r->curve[CURVE_ICL], n},
                            {"ICL score (nats/byte)", x, r->curve[CURVE_ICL_BYTE], n}};
    hl_plot_series heads[] = {{"best induction, layers 1.. (probe)", x,
                               r->curve[CURVE_INDUCTION], n},
                              {"best induction, layers 1.. (text)", x,
                               r->curve[CURVE_INDUCTION_TEXT], n},
                              {"best previous-token, layer 0", x, r->curve[CURVE_PREVIOUS], n}};
    hl_plot_panel panels[] = {{.y_label = "loss (nats/token)", .series = loss, .n_series = 2},
                              {.y_label = "late - early loss", .series = icl,
                               .n_series = words ? 2 : 1},
                              {.y_label = "head score", .series = heads, .n_series = 3,
                               .y_min = 0, .y_max = 1}};
    hl_plot_opts opts = {.title = "loss, in-context learning and heads", .x_label = "step"};
    char path[4200];
    snprintf(path, sizeof path, "%s/heads.png", r->o.out);
    return hl_plot_write(panels, 3, path, &opts, err);
}

/* One head's scores into an evaluation's best three, the two halves of an
 * induction circuit: induction in a later layer (probe, text) and
 * previous-token in layer 0. NaN, undefined, is skipped; a best stays NaN
 * while no head has a number for it (a one-layer model's induction). */
static void best_heads_add(double best[3], int layer, double induction, double text,
                           double previous)
{
    const double v[3] = {layer > 0 ? induction : NAN, layer > 0 ? text : NAN,
                         layer > 0 ? NAN : previous};
    for (int k = 0; k < 3; k++)
        if (!isnan(v[k]) && !(v[k] <= best[k]))
            best[k] = v[k];
}

/* Every head's detectors on the probe, and its induction score on the
 * validation text, into heads.csv; heads.png. */
static hl_status track_heads(run *r, int64_t step, const double point[CURVES], hl_error *err)
{
    const hl_gpt_config *c = &r->m->cfg;
    const size_t cells = (size_t)c->n_layers * c->n_heads;
    hl_head_scores *s = malloc(sizeof *s * cells), *ts = malloc(sizeof *ts * cells);
    hl_status st = s && ts ? HL_OK : hl_error_set(err, HL_ERR_NOMEM, "out of memory");
    if (st == HL_OK)
        st = hl_heads_detect(r->m, r->probe.set, NULL, s, err);
    if (st == HL_OK)
        st = hl_heads_detect(r->m, r->text_set, NULL, ts, err);
    if (st != HL_OK) {
        free(s);
        free(ts);
        return st;
    }
    double best[3] = {NAN, NAN, NAN};
    for (int l = 0; l < c->n_layers; l++)
        for (int h = 0; h < hl_gpt_layer_heads(c, l); h++) {
            const double *v = s[l * c->n_heads + h].v;
            const double text = ts[l * c->n_heads + h].v[HL_DETECT_INDUCTION];
            /* heads by the names they were trained with (a pruned model's) */
            fprintf(r->heads_log, "%lld,%d,%d", (long long)step, l, r->m->head_original[l][h]);
            for (int d = 0; d < HL_DETECTORS; d++)
                fprintf(r->heads_log, ",%.6f", v[d]);
            fprintf(r->heads_log, ",%.6f\n", text);
            best_heads_add(best, l, v[HL_DETECT_INDUCTION], text, v[HL_DETECT_PREVIOUS]);
        }
    fflush(r->heads_log);
    free(s);
    free(ts);
    const int i = r->n_points++;
    r->at_step[i] = (double)step;
    for (int k = 0; k < CURVES; k++)
        r->curve[k][i] = point[k];
    r->curve[CURVE_INDUCTION][i] = best[0];
    r->curve[CURVE_INDUCTION_TEXT][i] = best[1];
    r->curve[CURVE_PREVIOUS][i] = best[2];
    char text[3][16];
    for (int k = 0; k < 3; k++)
        snprintf(text[k], sizeof text[k], isnan(best[k]) ? "none" : "%.3f", best[k]);
    printf("  heads: best induction in layers 1.. %s (on the text %s), best previous-token "
           "in layer 0 %s\n", text[0], text[1], text[2]);
    return picture_or_note(plot_heads(r, err), "heads.png", err);
}

/* position_loss.png: the validation loss against the position in the
 * context. Falling to the right: the model reads its context (the ICL score
 * is the late minus the early part of this curve). */
static hl_status plot_position_loss(const run *r, int64_t step, hl_error *err)
{
    double *x = malloc(sizeof *x * (size_t)r->T);
    if (!x)
        return hl_error_set(err, HL_ERR_NOMEM, "out of memory");
    for (int t = 0; t < r->T; t++)
        x[t] = t;
    hl_plot_series loss = {"validation", x, r->position_loss, r->T};
    hl_plot_panel panel = {.y_label = "loss (nats/token)", .series = &loss, .n_series = 1};
    char title[96], path[4200];
    snprintf(title, sizeof title, "validation loss by context position, step %lld",
             (long long)step);
    hl_plot_opts opts = {.title = title, .x_label = "position in the context"};
    snprintf(path, sizeof path, "%s/position_loss.png", r->o.out);
    const hl_status s = hl_plot_write(&panel, 1, path, &opts, err);
    free(x);
    return s;
}

/* position_loss.csv: the last evaluation's validation loss per position, and
 * the mean bytes of the tokens it predicts (the ICL score per byte); and its
 * picture. */
static hl_status write_position_loss(const run *r, int64_t step, hl_error *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/position_loss.csv", r->o.out);
    hl_atomic_file f;
    if (hl_atomic_begin(&f, path, err) != HL_OK)
        return err->status;
    fprintf(f.f, "step,position,val_loss,target_bytes\n");
    for (int t = 0; t < r->T; t++)
        fprintf(f.f, "%lld,%d,%.6f,%.4f\n", (long long)step, t, r->position_loss[t],
                r->position_bytes[t]);
    if (hl_atomic_commit(&f, err) != HL_OK)
        return err->status;
    return picture_or_note(plot_position_loss(r, step, err), "position_loss.png", err);
}

/* Validation loss and the ICL score into train.csv and on stdout, the
 * per-position loss, the heads; a checkpoint after training. */
/* train.csv's row, the printout, the position losses, the heads and a
 * checkpoint (an hl_run_hooks record). */
static hl_status record(void *ctx, int64_t step, const hl_step_result *last, hl_error *err)
{
    run *r = ctx;
    const double train_loss = last->loss;
    hl_eval_result val;
    if (hl_eval_position_loss(r->m, r->val_set, NULL, r->position_loss, &val, err) != HL_OK)
        return err->status;
    const double icl = hl_eval_icl_score(r->position_loss, NULL, r->T);
    const double icl_byte = hl_eval_icl_score(r->position_loss, r->position_bytes, r->T);
    /* The rate of the step whose loss and gradient norm the row holds (at
     * step 0, before any, of the first). */
    const double lr = r->o.lr * hl_lr_scale(&r->schedule, step > 0 ? step - 1 : 0);
    fprintf(r->log, "%lld,%.6f,%.6f,%.6f,%.6f,%.6g,%.4f,%.2f\n", (long long)step, train_loss,
            val.loss[0], icl, icl_byte, lr, last->grad_norm, hl_seconds() - r->t0);
    if (fflush(r->log) != 0 || ferror(r->log))
        return hl_error_set(err, HL_ERR_IO, "cannot write %s/train.csv: %s", r->o.out,
                            strerror(errno));
    char per_byte[48] = "";
    if (hl_vocab_size(r->vocab) > HL_VOCAB_BYTES)
        snprintf(per_byte, sizeof per_byte, " (%.4f nats/byte)", icl_byte);
    if (isnan(train_loss)) /* nothing trained yet in this run */
        printf("step %lld: validation loss %.4f, ICL score %.4f%s\n", (long long)step,
               val.loss[0], icl, per_byte);
    else
        printf("step %lld: train loss %.4f, validation loss %.4f, ICL score %.4f%s\n",
               (long long)step, train_loss, val.loss[0], icl, per_byte);
    const double point[CURVES] = {[CURVE_TRAIN] = train_loss, [CURVE_VAL] = val.loss[0],
                                  [CURVE_ICL] = icl, [CURVE_ICL_BYTE] = icl_byte};
    if (write_position_loss(r, step, err) != HL_OK || track_heads(r, step, point, err) != HL_OK)
        return err->status;
    if (step <= r->start)
        return HL_OK;
    const hl_status saved = save_checkpoint(r, step, err);
    if (saved == HL_OK)
        r->saved_step = step;
    return saved;
}

/* The learning-rate schedule the flags ask for. */
static hl_lr_schedule schedule_of(const options *o)
{
    return (hl_lr_schedule){.warmup_steps = o->warmup, .total_steps = o->steps,
                            .cosine = !strcmp(o->schedule, "cosine"), .min_scale = 0.1,
                            .decay_frac = !strcmp(o->schedule, "wsd") ? o->decay_frac : 0};
}

/* Steps start..steps (train/run.h), evaluating on rank 0 every eval_every. */
static void train(run *r)
{
    r->schedule = schedule_of(&r->o);
    const hl_run_hooks hooks = {.ctx = r, .batch = next_batch, .loss = shard_loss,
                                .record = record,
                                .gather = hl_dist_size() > 1 ? gather_dropout : NULL};
    const hl_run_opts opts = {.start = r->start, .steps = r->o.steps,
                              .eval_every = r->o.eval_every, .schedule = r->schedule,
                              .clip = r->o.clip, .lead = r->lead, .progress = stdout,
                              .record_prints = true, .tuner = &r->tuner};
    r->t0 = hl_seconds() - r->seconds_before;
    hl_error err = {0};
    if (hl_run_train(r->g, r->m->params, r->opt, &opts, &hooks, &err) == HL_OK)
        return;
    if (r->batch_failed) { /* a token file that cannot be read: bad input */
        fprintf(stderr, "charlm: %s\n", err.message);
        hl_dist_abort(2);
    }
    if (r->lead)
        hl_cli_report_failed_run("charlm", err.message, r->o.out, r->saved_step, r->start,
                                 r->o.resume != NULL);
    hl_dist_abort(err.status == HL_ERR_IO ? 2 : 1);
}

/* Samples n tokens after the prompt, printing their text as they come. */
static void sample_text(hl_graph *g, const hl_gpt *m, const hl_vocab *vocab, const char *prompt,
                        int n, double temperature, hl_rng *rng)
{
    const int T = m->cfg.n_ctx, V = m->cfg.vocab_out;
    /* A pretrained model's embedding may be padded past its tokenizer's
     * tokens: sample among those that have text. */
    const int tokens = hl_vocab_size(vocab) < V ? hl_vocab_size(vocab) : V;
    int32_t *prompt_tokens = NULL;
    size_t len_prompt = 0;
    hl_error err = {0};
    if (hl_vocab_encode(vocab, (const unsigned char *)prompt, strlen(prompt), &prompt_tokens,
                        &len_prompt, &err) != HL_OK) {
        fprintf(stderr, "charlm: sampling: %s\n", err.message);
        return;
    }
    int32_t *context = malloc(sizeof *context * (len_prompt + (size_t)n + 1));
    double *p = malloc(sizeof *p * (size_t)V);
    if (!context || !p) {
        free(prompt_tokens);
        free(context);
        free(p);
        return;
    }
    int len = (int)len_prompt;
    memcpy(context, prompt_tokens, sizeof *context * len_prompt);
    free(prompt_tokens);
    fputs(prompt, stdout);
    bool grad = hl_graph_set_grad_enabled(g, false), training = hl_graph_set_training(g, false);
    for (int i = 0; i < n; i++) {
        int start = len > T ? len - T : 0, width = len - start;
        hl_tensor *logits = hl_gpt_forward(g, m, context + start, 1, width, NULL);
        if (hl_graph_failed(g)) {
            fprintf(stderr, "charlm: sampling: %s\n", hl_graph_message(g));
            break;
        }
        hl_real *row = logits->data + (size_t)(width - 1) * V;
        for (int v = 0; m->cfg.softcap > 0 && v < V; v++) /* the logits the loss reads */
            row[v] = hl_gpt_logit(&m->cfg, row[v]);
        double max = -INFINITY, sum = 0;
        for (int v = 0; v < tokens; v++)
            max = fmax(max, row[v] / temperature);
        for (int v = 0; v < tokens; v++)
            sum += p[v] = exp(row[v] / temperature - max);
        double u = hl_rng_uniform(rng) * sum;
        int next = 0;
        while (next < tokens - 1 && (u -= p[next]) > 0)
            next++;
        context[len++] = next;
        size_t piece_len;
        const unsigned char *piece = hl_vocab_piece(vocab, next, &piece_len);
        fwrite(piece, 1, piece_len, stdout);
        hl_graph_reset(g);
    }
    putchar('\n');
    hl_graph_set_grad_enabled(g, grad);
    hl_graph_set_training(g, training);
    free(context);
    free(p);
}

/* ---- set-up ---- */

/* Bytes of memory this process may still take: MemAvailable, or free pages
 * where /proc is missing, and at most its address-space limit (ulimit -v). */
static uint64_t memory_available(void)
{
    uint64_t avail = (uint64_t)sysconf(_SC_AVPHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            avail = (uint64_t)kb * 1024;
    if (f)
        fclose(f);
    struct rlimit lim;
    if (getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY &&
        (uint64_t)lim.rlim_cur < avail)
        avail = (uint64_t)lim.rlim_cur;
    return avail;
}

/* Exits 2, pointing to build/tokenize, when the text would not fit in memory
 * (rather than being killed by the system half-way). */
static void check_text_memory(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return; /* hl_fs_read_file says why */
    const uint64_t need = (uint64_t)st.st_size * DATA_BYTES_IN_MEMORY;
    const uint64_t avail = memory_available();
    if (need > avail) {
        fprintf(stderr, "charlm: %s has %.2f GB of text, which takes about %.1f GB in memory "
                "with --data, and %.1f GB are available; tokenize it once with `build/tokenize "
                "%s --out DIR` and train with --tokens DIR (memory-mapped)\n", path,
                (double)st.st_size / 1e9, (double)need / 1e9, (double)avail / 1e9, path);
        hl_dist_abort(2);
    }
}

/* The text, split 90/10 by bytes, and its tokens: the vocabulary is learnt
 * from the training part (or comes from the checkpoint: r->vocab is set) and
 * encodes both. Exits 2 when the file cannot be read or is too short. */
static void load_text(run *r)
{
    check_text_memory(r->o.data);
    unsigned char *text = hl_fs_read_file(r->o.data, &r->size);
    if (!text) {
        fprintf(stderr, "charlm: cannot read %s: %s\n", r->o.data, strerror(errno));
        hl_dist_abort(2);
    }
    if (hl_token_magic(text, r->size)) { /* its header and ids would train as bytes */
        fprintf(stderr, "charlm: %s is a token file of build/tokenize: give its folder with "
                "--tokens DIR\n", r->o.data);
        hl_dist_abort(2);
    }
    const size_t n_val = r->size / 10, n_train = r->size - n_val;
    hl_error err = {0};
    if (!r->vocab)
        r->vocab = !r->o.vocab ? hl_vocab_bytes()
                   : r->o.tokenizer && !strcmp(r->o.tokenizer, "bpe")
                       ? hl_vocab_learn_bpe(text, n_train, r->o.vocab, &err)
                       : hl_vocab_learn(text, n_train, r->o.vocab, &err);
    size_t n[2] = {0, 0};
    /* --doc-windows: the training text encoded document by document (as
     * tokenize encodes it), keeping where each starts. */
    if (!r->vocab ||
        (r->o.doc_windows ? hl_docs_encode(r->vocab, text, n_train, &r->tokens[0], &n[0],
                                           &r->doc_starts, &r->n_docs, &err)
                          : hl_vocab_encode(r->vocab, text, n_train, &r->tokens[0], &n[0],
                                            &err)) != HL_OK ||
        hl_vocab_encode(r->vocab, text + n_train, n_val, &r->tokens[1], &n[1], &err) != HL_OK) {
        free(text);
        fprintf(stderr, "charlm: %s\n", err.message[0] ? err.message : "out of memory");
        hl_dist_abort(1);
    }
    free(text);
    if (r->o.vocab && !r->o.resume && hl_vocab_size(r->vocab) < r->o.vocab && r->lead)
        printf("note: --vocab %d: the text gives %d tokens (%s)\n", r->o.vocab,
               hl_vocab_size(r->vocab), r->o.tokenizer && !strcmp(r->o.tokenizer, "bpe")
                                            ? "no more pairs occur twice"
                                            : "it has no more words");
    r->train = (text_span){.tokens = r->tokens[0], .size = n[0]};
    r->val = (text_span){.tokens = r->tokens[1], .size = n[1]};
}

/* --tokens: DIR/train.tok and DIR/val.tok, mapped. Their vocabulary is the
 * model's (a copy), or must be the checkpoint's (r->vocab is set), and the
 * files must be those the checkpoint was trained on. Exits 2 otherwise. */
static void load_tokens(run *r)
{
    static const char *names[2] = {"train.tok", "val.tok"};
    hl_error err = {0};
    char path[4200];
    size_t at = 0;
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", r->o.tokens, names[i]);
        if (!(r->files[i] = hl_token_file_open(path, &err))) {
            fprintf(stderr, "charlm: %s\n", err.message);
            hl_dist_abort(2);
        }
        const hl_token_header *h = hl_token_file_header(r->files[i]);
        r->size += h->text_bytes;
        at += (size_t)snprintf(r->tokens_meta + at, sizeof r->tokens_meta - at,
                               "%s%s %016" PRIx64, i ? "\n" : "", path,
                               hl_token_file_fingerprint(r->files[i]));
    }
    const hl_token_header *train = hl_token_file_header(r->files[0]);
    if (hl_token_file_header(r->files[1])->vocab_hash != train->vocab_hash) {
        fprintf(stderr, "charlm: %s/train.tok and %s/val.tok have different vocabularies\n",
                r->o.tokens, r->o.tokens);
        hl_dist_abort(2);
    }
    /* Resuming or fine-tuning: the files must speak the model's vocabulary
     * (the same tokens, and its size). A new run takes the file's own. */
    if (r->vocab && (!hl_vocab_same_tokens(r->vocab, hl_token_file_vocab(r->files[0])) ||
                     (int64_t)train->vocab_size != hl_vocab_size(r->vocab))) {
        const char *from = r->o.resume ? r->o.resume : r->o.init_from;
        fprintf(stderr, "charlm: %s/train.tok was made with another vocabulary than the "
                "model's in %s (tokenize it with --vocab-from %s)\n", r->o.tokens, from, from);
        hl_dist_abort(2);
    }
    char *file_vocab = r->vocab ? NULL : hl_vocab_format(hl_token_file_vocab(r->files[0]));
    if (!r->vocab && !(file_vocab && (r->vocab = hl_vocab_parse(file_vocab, &err)))) {
        fprintf(stderr, "charlm: %s\n", file_vocab ? err.message : "out of memory");
        hl_dist_abort(1);
    }
    free(file_vocab);
    r->train = (text_span){.file = r->files[0], .size = (size_t)train->n_tokens};
    r->val = (text_span){.file = r->files[1],
                         .size = (size_t)hl_token_file_header(r->files[1])->n_tokens};
}

/* Resuming from --tokens: the checkpoint's token files must be these (their
 * fingerprints; the paths may differ). Exits 2 otherwise. */
static void check_same_tokens(const run *r)
{
    hl_safetensors *f = NULL;
    hl_error err = {0};
    if (hl_safetensors_read_header(r->o.resume, &f, &err) != HL_OK) {
        fprintf(stderr, "charlm: %s\n", err.message);
        hl_dist_abort(2);
    }
    const char *saved = hl_safetensors_metadata(f, "tokens");
    if (!saved) {
        fprintf(stderr, "charlm: %s was not trained from token files (it names none); resume "
                "it with --data\n", r->o.resume);
        hl_safetensors_free(f);
        hl_dist_abort(2);
    }
    for (int i = 0; i < 2; i++) {
        const char *line = saved;
        for (int k = 0; k < i && line; k++)
            line = (line = strchr(line, '\n')) ? line + 1 : NULL;
        /* "<path> <fingerprint>": the last space of the line, since a path may
         * hold spaces. */
        const char *end = line ? strchr(line, '\n') : NULL;
        if (line && !end)
            end = line + strlen(line);
        const char *space = NULL;
        for (const char *c = line; c && c < end; c++)
            if (*c == ' ')
                space = c;
        char want[17];
        snprintf(want, sizeof want, "%016" PRIx64, hl_token_file_fingerprint(r->files[i]));
        if (!space || *space != ' ' || strncmp(space + 1, want, 16) != 0) {
            fprintf(stderr, "charlm: %s was not trained on %s (the checkpoint's token files: "
                    "%s): it changed, or is another corpus\n", r->o.resume,
                    hl_token_file_path(r->files[i]), saved);
            hl_safetensors_free(f);
            hl_dist_abort(2);
        }
    }
    hl_safetensors_free(f);
}

/* The file's bytes per token of its encoding. */
static double bytes_per_token(const run *r)
{
    return (double)r->size / (double)(r->train.size + r->val.size);
}

/* --doc-windows: the training text's documents (the token file's index;
 * --data found them while encoding) and those that start a whole window.
 * Exits 2 when none does. */
static void setup_doc_windows(run *r)
{
    if (!r->o.doc_windows)
        return;
    if (r->files[0]) {
        const uint64_t *starts = hl_token_file_docs(r->files[0], &r->n_docs);
        if (!(r->doc_starts = malloc((r->n_docs ? r->n_docs : 1) * sizeof *starts))) {
            fprintf(stderr, "charlm: out of memory\n");
            hl_dist_abort(1);
        }
        memcpy(r->doc_starts, starts, r->n_docs * sizeof *starts);
    }
    r->doc_windows =
        hl_docs_window_starts(r->doc_starts, r->n_docs, r->train.size, (size_t)r->T + 1);
    if (!r->doc_windows) {
        fprintf(stderr, "charlm: --doc-windows: no document of the training text starts %d "
                "tokens before its end\n", r->T + 1);
        hl_dist_abort(2);
    }
    /* Windows start at documents only, as the speedruns' aligned batches
     * do: a document longer than the window is read in its first T + 1
     * tokens, which the share below says. */
    const double read = (double)hl_docs_window_coverage(r->doc_starts, r->doc_windows,
                                                        r->train.size, (size_t)r->T + 1) /
                        (double)r->train.size;
    if (r->lead)
        printf("documents: %zu in the training text, %zu of them start a window; the windows "
               "read %.1f%% of the training tokens%s\n", r->n_docs, r->doc_windows, 100 * read,
               read < 0.999 ? " (they start at documents only: a document longer than a window "
                              "is read in its first --ctx + 1 tokens, and the last documents "
                              "may leave no whole window)" : "");
}

/* Exits 2 when the text is too short for the context. */
static void check_text_fits(const run *r)
{
    if (r->val.size < (size_t)r->T + 2 || r->train.size < (size_t)r->T + 2) {
        fprintf(stderr, "charlm: %s has %zu bytes, %zu + %zu tokens; with --ctx %d each part "
                "(training, validation) needs at least %d tokens\n",
                r->o.data ? r->o.data : r->o.tokens,
                r->size, r->train.size, r->val.size, r->T, r->T + 2);
        hl_dist_abort(2);
    }
}

/* --resume and --init-from take the model's size from the file: --d-model,
 * --heads or --layers given too must agree with it, and with --resume so must
 * --dropout (exit 2); fine-tuning takes --dropout as given (setup). */
static void check_model_size(const options *o, const hl_gpt_config *cfg)
{
    const char *flag = o->d_model_given && o->d_model != cfg->d_model ? "--d-model"
                       : o->heads_given && o->heads != cfg->n_heads   ? "--heads"
                       : o->layers_given && o->layers != cfg->n_layers ? "--layers"
                       : o->resume && o->dropout_given && o->dropout != cfg->dropout
                           ? "--dropout"
                           : NULL;
    if ((o->resume || o->init_from) && flag)
        hl_cli_bad_input("charlm", "%s with %s: the model of %s has d_model %d, %d heads, %d "
                         "layers and dropout %g", flag, o->resume ? "--resume" : "--init-from",
                         o->resume ? o->resume : o->init_from, cfg->d_model, cfg->n_heads,
                         cfg->n_layers, cfg->dropout);
}

/* A new model for the vocabulary, or the checkpoint's model, vocabulary and
 * special tokens. */
static hl_gpt *build_model(const options *o, hl_vocab **vocab, hl_hf_token_ids *token_ids,
                           hl_error *err)
{
    const char *from = o->resume ? o->resume : o->init_from;
    if (from) {
        hl_gpt_meta meta;
        hl_gpt *m = hl_gpt_load_meta(from, &meta, err);
        /* Fine-tuning a model without a tokenizer headlab reads takes the
         * token files' vocabulary (load_tokens, checked in setup). */
        if (m && !meta.vocab && (o->resume || !o->tokens)) {
            hl_error_set(err, HL_ERR_FORMAT, "%s %s%s%s%s", from,
                         o->resume ? "is not a text model's checkpoint"
                                   : "has no tokenizer headlab reads (tokenizer.json, vocab.json "
                                     "+ merges.txt); give --tokens DIR of its token ids",
                         meta.vocab_note[0] ? " (" : "", meta.vocab_note,
                         meta.vocab_note[0] ? ")" : "");
            hl_gpt_free(m);
            return NULL;
        }
        *vocab = meta.vocab;
        *token_ids = meta.token_ids;
        return m;
    }
    const int V = hl_vocab_size(*vocab);
    hl_gpt_config cfg = {.vocab_in = V, .vocab_out = V, .n_ctx = o->ctx,
                         .d_model = o->d_model, .n_heads = o->heads, .n_layers = o->layers,
                         .mlp = (hl_gpt_mlp)hl_gpt_mlp_parse(o->mlp),
                         .norm = (hl_gpt_norm)hl_gpt_norm_parse(o->norm),
                         .pos = (hl_gpt_pos)hl_gpt_pos_parse(o->pos), .rope_base = o->rope_base,
                         .tie_embeddings = o->tie, .smear_keys = o->smear,
                         .dropout = o->dropout, .emb_std = o->emb_std,
                         .n_kv_heads = o->kv_heads, .rotary_dims = o->rotary_dims,
                         .parallel_residual = o->parallel, .no_qkv_bias = o->no_bias,
                         .no_out_bias = o->no_bias, .no_mlp_bias = o->no_bias,
                         .no_head_bias = o->no_head_bias, .qk_norm = o->qk_norm,
                         .softcap = o->softcap};
    return hl_gpt_new(&cfg, err);
}

/* Every rank must run the same configuration on the same data. */
static void check_ranks_agree(const run *r)
{
    char check[1024];
    snprintf(check, sizeof check, "%s batch=%d steps=%d lr=%g clip=%g seed=%d data_bytes=%zu "
             "tokens=%zu+%zu copies=%g/%d optim=%s/%g schedule=%s/%g zero_init=%d",
             r->config, r->B, r->o.steps, r->o.lr, r->o.clip, r->o.seed, r->size, r->train.size,
             r->val.size, r->o.copy_windows, r->copy_span, r->o.optim, r->o.muon_lr,
             r->o.schedule, r->o.decay_frac, r->o.zero_init);
    hl_error err = {0};
    if (hl_dist_check_same(check, &err) != HL_OK) {
        if (r->lead)
            fprintf(stderr, "charlm: the ranks were started with different options or data: "
                    "%s\n", err.message);
        hl_dist_abort(2);
    }
    if (r->B < hl_dist_size()) {
        fprintf(stderr, "charlm: --batch %d is smaller than the %d ranks\n", r->B,
                hl_dist_size());
        hl_dist_abort(2);
    }
}

/* Fresh weights, or the checkpoint's (exit 2 when it has nothing left to train). */
static void start_model(run *r)
{
    hl_rng init_rng;
    hl_rng_seed(&init_rng, (uint64_t)r->o.seed);
    hl_rng_seed(&r->data_rng, (uint64_t)r->o.seed + 1);
    hl_graph_seed(r->g, (uint64_t)r->o.seed + 2 + (uint64_t)hl_dist_rank()); /* dropout */
    if (r->o.init_from) {
        if (r->lead)
            printf("fine-tuning %s\n", r->o.init_from);
    } else if (!r->o.resume) {
        hl_gpt_init_weights(r->m, &init_rng);
        if (!strcmp(r->o.pos_init, "sinusoidal"))
            hl_gpt_init_positions_sinusoidal(r->m);
        if (r->o.zero_init)
            hl_gpt_zero_init(r->m);
    } else {
        hl_error err = {0};
        char own[RANK_RNG_NAME_MAX];
        bool found = false;
        snprintf(own, sizeof own, "dropout.rank%d", hl_dist_rank());
        hl_checkpoint_rng rngs[] = {{"data", &r->data_rng, NULL},
                                    {"dropout", &r->g->rng, NULL},
                                    {own, &r->g->rng, &found}};
        if (hl_checkpoint_resume(r->o.resume, r->m->params, r->opt, r->o.steps, &r->start,
                                 rngs, r->lead ? 2 : 3, &err) != HL_OK) {
            /* The other ranks also read their own stream, which rank 0 does
             * not: they say which rank failed. */
            if (r->lead)
                fprintf(stderr, "charlm: %s\n", err.message);
            else
                fprintf(stderr, "charlm: rank %d: %s\n", hl_dist_rank(), err.message);
            hl_dist_abort(2);
        }
        /* A checkpoint of fewer ranks has no stream for this one: it splits
         * its own off rank 0's, as a fresh run seeds the ranks apart. */
        if (!r->lead && !found)
            hl_graph_seed(r->g, hl_rng_next(&r->g->rng) + (uint64_t)hl_dist_rank());
        if (r->lead)
            printf("resumed from %s at step %lld%s\n", r->o.resume, (long long)r->start,
                   r->o.seed_given ? " (--seed unused: the batches, dropout and sampling go on "
                                     "from the checkpoint's random state)"
                                   : "");
    }
    hl_dist_broadcast_params(r->m->params);
}

/* DIR/name: new, or when resuming its rows up to the checkpoint's step
 * (io/csv_log.h). */
static FILE *open_log(const char *dir, const char *name, int64_t resume_step,
                      const char *header)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    hl_error err = {0};
    FILE *log = hl_csv_log_open(path, resume_step, header, &err);
    if (!log) {
        fprintf(stderr, "charlm: %s\n", err.message);
        hl_dist_abort(2);
    }
    return log;
}

/* The bytes each validation position predicts, for the ICL score per byte. */
static bool measure_position_bytes(run *r)
{
    const int V = hl_vocab_size(r->vocab);
    double *token_bytes = malloc(sizeof *token_bytes * (size_t)V);
    if (!token_bytes)
        return false;
    hl_vocab_token_bytes(r->vocab, token_bytes);
    hl_eval_position_weights(r->val_set, token_bytes, r->position_bytes);
    free(token_bytes);
    return true;
}

/* DIR/name, a log open_log kept, parsed. */
static hl_status read_log(const run *r, const char *name, hl_csv_table *t, hl_error *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", r->o.out, name);
    return hl_csv_read(path, t, err);
}

/* track_heads' three best scores of one step from heads.csv's rows, the
 * rows from *at on, *at moved past them; NaN when the step has no rows (a
 * kill between the two logs' rows). */
static void best_heads_of_step(const hl_csv_table *h, size_t *at, double step, double best[3])
{
    const int c_step = hl_csv_column(h, "step"), c_layer = hl_csv_column(h, "layer"),
              c_ind = hl_csv_column(h, hl_detector_name(HL_DETECT_INDUCTION)),
              c_prev = hl_csv_column(h, hl_detector_name(HL_DETECT_PREVIOUS)),
              c_text = hl_csv_column(h, "induction_text");
    while (*at < h->n_rows && hl_csv_value(h, *at, c_step) < step)
        ++*at;
    best[0] = best[1] = best[2] = NAN;
    for (; *at < h->n_rows && hl_csv_value(h, *at, c_step) == step; ++*at)
        best_heads_add(best, (int)hl_csv_value(h, *at, c_layer), hl_csv_value(h, *at, c_ind),
                       hl_csv_value(h, *at, c_text), hl_csv_value(h, *at, c_prev));
}

/* A resumed run's earlier points of heads.png, from the rows of train.csv
 * and heads.csv up to the checkpoint's step, so that the picture shows the
 * whole run; *prior of them. Fails only on a log that does not parse. */
static hl_status read_earlier_points(run *r, size_t room, int *prior, hl_error *err)
{
    *prior = 0;
    hl_csv_table t, h;
    if (read_log(r, "train.csv", &t, err) != HL_OK)
        return err->status;
    /* seconds go on from the last row kept, the checkpoint's */
    const int c_seconds = hl_csv_column(&t, "seconds");
    const double seconds = t.n_rows && c_seconds >= 0
                               ? hl_csv_value(&t, t.n_rows - 1, c_seconds) : 0;
    r->seconds_before = isfinite(seconds) && seconds > 0 ? seconds : 0;
    if (read_log(r, "heads.csv", &h, err) != HL_OK) {
        hl_csv_table_free(&t);
        return err->status;
    }
    bool ok = true;
    for (int k = 0; k < CURVES; k++)
        ok &= (r->curve[k] = malloc(sizeof(double) * (t.n_rows + room))) != NULL;
    if (!ok || !(r->at_step = malloc(sizeof(double) * (t.n_rows + room)))) {
        hl_csv_table_free(&t);
        hl_csv_table_free(&h);
        return hl_error_set(err, HL_ERR_NOMEM, "out of memory");
    }
    static const char *const columns[] = {[CURVE_TRAIN] = "train_loss",
                                          [CURVE_VAL] = "val_loss",
                                          [CURVE_ICL] = "icl_score",
                                          [CURVE_ICL_BYTE] = "icl_score_per_byte"};
    const int c_step = hl_csv_column(&t, "step");
    size_t at = 0;
    for (size_t i = 0; i < t.n_rows; i++) {
        const double step = hl_csv_value(&t, i, c_step);
        r->at_step[i] = step;
        for (int k = 0; k <= CURVE_ICL_BYTE; k++)
            r->curve[k][i] = hl_csv_value(&t, i, hl_csv_column(&t, columns[k]));
        double best[3];
        best_heads_of_step(&h, &at, step, best);
        r->curve[CURVE_INDUCTION][i] = best[0];
        r->curve[CURVE_INDUCTION_TEXT][i] = best[1];
        r->curve[CURVE_PREVIOUS][i] = best[2];
    }
    *prior = (int)t.n_rows;
    hl_csv_table_free(&t);
    hl_csv_table_free(&h);
    return HL_OK;
}

/* The probe, heads.csv and room for one point per evaluation (rank 0). */
static void setup_heads(run *r)
{
    if (!r->lead)
        return;
    hl_error err = {0};
    hl_probe_opts probe = hl_probe_text_opts(r->vocab);
    probe.sequences = PROBE_SEQUENCES;
    char header[256] = "step,layer,head";
    for (int d = 0; d < HL_DETECTORS; d++)
        snprintf(header + strlen(header), sizeof header - strlen(header), ",%s",
                 hl_detector_name(d));
    snprintf(header + strlen(header), sizeof header - strlen(header), ",induction_text");
    r->heads_log = open_log(r->o.out, "heads.csv", r->start > 0 ? r->start : -1, header);
    const size_t n = (size_t)((r->o.steps - r->start) / r->o.eval_every + 2);
    if (r->start > 0 && read_earlier_points(r, n, &r->n_points, &err) != HL_OK) {
        if (err.status == HL_ERR_NOMEM) {
            fprintf(stderr, "charlm: out of memory\n");
            hl_dist_abort(1);
        }
        printf("note: heads.png shows this run's points alone: %s\n", err.message);
        err = (hl_error){0};
    }
    bool ok = r->at_step || (r->at_step = malloc(sizeof(double) * n)) != NULL;
    for (int k = 0; k < CURVES; k++)
        ok &= r->curve[k] || (r->curve[k] = malloc(sizeof(double) * n)) != NULL;
    ok &= (r->position_loss = malloc(sizeof(double) * (size_t)r->T)) != NULL;
    ok &= (r->position_bytes = malloc(sizeof(double) * (size_t)r->T)) != NULL &&
          measure_position_bytes(r);
    if (!ok || hl_probe_new(r->m, &probe, &r->probe, &err) != HL_OK ||
        !(r->text_set = hl_eval_text_windows_read(span_read, &r->val, r->val.size, TEXT_WINDOWS,
                                                  r->T, 4, &err))) {
        fprintf(stderr, "charlm: %s\n", err.message[0] ? err.message : "out of memory");
        hl_dist_abort(err.status == HL_ERR_FORMAT ? 2 : 1); /* a bad token file */
    }
}

/* AdamW for every parameter, or with --optim muon only for those that are
 * not hidden matrices (models/gpt_groups.h). Muon's momentum 0.95 and weight
 * decay 0 are the published defaults. */
static hl_optim *new_optimizer(hl_gpt *m, const options *o, hl_error *err)
{
    const bool muon = !strcmp(o->optim, "muon");
    const hl_optim_groups groups = {
        .n = muon ? 2 : 1, .group_of = muon ? hl_gpt_param_group : NULL, .ctx = m,
        .cfg = {[HL_GPT_GROUP_OTHER] = {.kind = HL_OPTIM_ADAMW, .lr = o->lr, .beta1 = o->beta1,
                                        .beta2 = o->beta2, .eps = 1e-8, .weight_decay = 0.01},
                [HL_GPT_GROUP_HIDDEN] = {.kind = HL_OPTIM_MUON, .lr = o->muon_lr,
                                         .momentum = 0.95}}};
    return hl_optim_new_groups(m->params, &groups, err);
}

/* The optimizer and schedule line of the summary. */
static void print_training(const run *r)
{
    const options *o = &r->o;
    if (!strcmp(o->optim, "muon")) {
        size_t hidden = 0, values = 0;
        for (size_t i = 0; i < hl_params_n_tensors(r->m->params); i++)
            if (hl_optim_tensor_kind(r->opt, i) == HL_OPTIM_MUON) {
                hidden++;
                values += hl_params_tensor(r->m->params, i)->numel;
            }
        printf("  optimizer: Muon (lr %g, momentum 0.95, 5 Newton-Schulz steps) on %zu hidden "
               "matrices (%zu values), AdamW (lr %g, betas %g, %g, weight decay 0.01) on the "
               "rest\n", o->muon_lr, hidden, values, o->lr, o->beta1, o->beta2);
    } else {
        printf("  optimizer: AdamW (lr %g, betas %g, %g, weight decay 0.01)\n", o->lr, o->beta1,
               o->beta2);
    }
    printf("  schedule: %d warm-up steps, then %s", o->warmup, o->schedule);
    if (!strcmp(o->schedule, "wsd"))
        printf(" (linear decay to 0 over the last %g of the steps)", o->decay_frac);
    printf("%s\n", !o->zero_init ? ""
                   : o->tie      ? "; zero-initialised projections (the head is the embedding)"
                                 : "; zero-initialised projections and head");
    if (o->warmup > o->steps && o->steps > 0) {
        const hl_lr_schedule schedule = schedule_of(o);
        double most = 0;
        for (int k = 0; k < o->steps; k++)
            most = fmax(most, hl_lr_scale(&schedule, k));
        printf("  note: the %d steps end inside the %d-step warm-up: the rate reaches %.2g of "
               "its peak at most (--warmup N sets a shorter one)\n", o->steps, o->warmup, most);
    }
}

static void setup(run *r, const options *o)
{
    *r = (run){.o = *o, .lead = hl_dist_rank() == 0, .B = o->batch};
    hl_error err = {0};
    /* A checkpoint brings its vocabulary; a new run learns one from the text
     * first. */
    void (*load)(run *) = o->tokens ? load_tokens : load_text;
    if (!o->resume && !o->init_from)
        load(r);
    r->m = build_model(o, &r->vocab, &r->token_ids, &err);
    if (!r->m) {
        fprintf(stderr, "charlm: %s\n", err.message);
        hl_dist_abort(2);
    }
    if (o->resume || o->init_from)
        load(r);
    /* The token files' vocabulary, when the pretrained model brought none:
     * one token for each of the model's (a pretrained one may be fewer, as
     * padded embeddings are), as a model file must store it. */
    const int size = hl_vocab_size(r->vocab), in = r->m->cfg.vocab_in, out = r->m->cfg.vocab_out;
    if (o->init_from && o->tokens &&
        (!strcmp(hl_vocab_kind(r->vocab), "pretrained") ? size > in || size > out
                                                         : size != in || size != out))
        hl_cli_bad_input("charlm", "%s/train.tok has a vocabulary of %d tokens; the model of %s "
                         "reads %d and predicts %d", o->tokens, size, o->init_from, in, out);
    check_model_size(o, &r->m->cfg);
    if (o->init_from && o->dropout_given)
        r->m->cfg.dropout = o->dropout;
    if (o->resume && o->tokens)
        check_same_tokens(r);
    /* A pretrained model may train on windows shorter than its positions. */
    const int n_ctx = r->m->cfg.n_ctx;
    if ((o->init_from || o->resume) && o->ctx_given && o->ctx > n_ctx)
        hl_cli_bad_input("charlm", "--ctx %d: the model of %s reads at most %d positions", o->ctx,
                         o->resume ? o->resume : o->init_from, n_ctx);
    r->T = (o->init_from || o->resume) && o->ctx_given && o->ctx < n_ctx ? o->ctx : n_ctx;
    check_text_fits(r);
    setup_doc_windows(r);
    if (o->copy_windows > 0) {
        r->copy_span = o->copy_span ? o->copy_span : r->T / 4 > 0 ? r->T / 4 : 1;
        if (2 * r->copy_span > r->T + 1)
            hl_cli_bad_input("charlm", "--copy-span %d: a span and its copy must fit in the "
                             "window of ctx+1 = %d tokens", r->copy_span, r->T + 1);
    }
    hl_gpt_config_format(&r->m->cfg, r->config, sizeof r->config);
    format_training(o, r->T, r->copy_span, r->training, sizeof r->training);
    check_ranks_agree(r);
    if (r->lead && hl_fs_make_dirs(o->out)) {
        fprintf(stderr, "charlm: cannot create %s: %s\n", o->out, strerror(errno));
        hl_dist_abort(2);
    }
    r->opt = new_optimizer(r->m, o, &err);
    r->g = hl_graph_new(0);
    if (r->lead && hl_dist_size() > 1 &&
        !(r->rank_dropout = malloc(sizeof *r->rank_dropout * (size_t)hl_dist_size()))) {
        fprintf(stderr, "charlm: out of memory\n");
        hl_dist_abort(1);
    }
    r->x = malloc(sizeof *r->x * (size_t)r->B * r->T);
    r->y = malloc(sizeof *r->y * (size_t)r->B * r->T);
    r->offsets = malloc(sizeof *r->offsets * (size_t)r->B);
    r->copies = malloc(sizeof *r->copies * (size_t)r->B);
    r->val_set = validation_set(r->val, o->val_windows, r->B, r->T, &err);
    if (!r->opt || !r->g || !r->x || !r->y || !r->offsets || !r->copies || !r->val_set) {
        fprintf(stderr, "charlm: %s\n", err.message[0] ? err.message : "out of memory");
        hl_dist_abort(err.status == HL_ERR_FORMAT ? 2 : 1); /* a bad token file */
    }
    start_model(r);
    r->log = r->lead ? open_log(o->out, "train.csv", r->start > 0 ? r->start : -1,
                                "step,train_loss,val_loss,icl_score,icl_score_per_byte,lr,grad_norm,"
                                "seconds")
                     : NULL;
    setup_heads(r);
    if (r->lead)
        printf("charlm: %s, %zu bytes; %d tokens (%s), %zu training and %zu validation "
               "tokens, %.3f bytes per token; %zu parameters; batch %d over %d rank(s)\n  %s\n",
               o->data ? o->data : o->tokens, r->size, hl_vocab_size(r->vocab),
               !strcmp(hl_vocab_kind(r->vocab), "words") ? "bytes and learnt words"
               : !strcmp(hl_vocab_kind(r->vocab), "bpe") ? "byte-level BPE"
               : !strcmp(hl_vocab_kind(r->vocab), "pretrained") ? "a pretrained tokenizer's"
                                                                 : "bytes",
               r->train.size, r->val.size, bytes_per_token(r), hl_params_n_values(r->m->params),
               r->B, hl_dist_size(), r->config);
    if (r->lead && o->preset)
        print_preset(o);
    if (r->lead)
        print_training(r);
    if (r->lead && r->copy_span)
        printf("  training-data intervention: in %.0f%% of the training windows a span of %d "
               "tokens recurs later in the window\n", 100 * o->copy_windows, r->copy_span);
}

/* model.safetensors, and the head report in DIR/report/ unless --no-report. */
static int finish(run *r)
{
    char path[4200];
    hl_error err = {0};
    hl_gpt_meta meta = {.task = "charlm", .step = r->o.steps, .vocab = r->vocab,
                        .token_ids = r->token_ids};
    hl_gpt_pruned_heads(r->m, &meta.pruned);
    snprintf(path, sizeof path, "%s/model.safetensors", r->o.out);
    if (hl_gpt_save_meta(path, r->m, &meta, &err) != HL_OK) {
        fprintf(stderr, "charlm: %s\n", err.message);
        return 1;
    }
    printf("wrote %s\n", path);
    if (r->o.no_report)
        return 0;
    snprintf(path, sizeof path, "%s/report", r->o.out);
    if (hl_fs_make_dirs(path)) {
        fprintf(stderr, "charlm: cannot create %s: %s\n", path, strerror(errno));
        return 1;
    }
    int32_t *x = r->val_set->tokens; /* the first validation window */
    /* The report's text: the validation tokens, from a token file their
     * first REPORT_TEXT_MAX. */
    size_t text_tokens = r->val.size;
    int32_t *text = (int32_t *)r->val.tokens;
    if (r->val.file) {
        text_tokens = text_tokens < REPORT_TEXT_MAX ? text_tokens : REPORT_TEXT_MAX;
        if (!(text = malloc(sizeof *text * text_tokens)) ||
            span_read(&r->val, 0, text_tokens, text, &err) != HL_OK) {
            free(text);
            fprintf(stderr, "charlm: report: %s\n", err.message[0] ? err.message
                                                                    : "out of memory");
            return 1;
        }
    }
    hl_head_report_opts ro = {.model_path = "model.safetensors", .meta = &meta,
                              .probe = hl_probe_text_opts(r->vocab),
                              .vocab = r->vocab, .map_tokens = x,
                              .map_T = r->T < REPORT_MAP_TOKENS ? r->T : REPORT_MAP_TOKENS,
                              .text = text, .text_tokens = text_tokens,
                              .eval = r->val_set};
    const hl_status st = hl_head_report_write(r->m, &ro, path, &err);
    if (text != r->val.tokens)
        free(text);
    if (st != HL_OK) {
        fprintf(stderr, "charlm: report: %s\n", err.message);
        return 1;
    }
    printf("wrote %s/report.html\n", path);
    return 0;
}

static void teardown(run *r)
{
    if (r->log)
        fclose(r->log);
    if (r->heads_log)
        fclose(r->heads_log);
    hl_probe_free(&r->probe);
    free(r->at_step);
    for (int k = 0; k < CURVES; k++)
        free(r->curve[k]);
    free(r->position_loss);
    free(r->position_bytes);
    hl_eval_set_free(r->text_set);
    free(r->x);
    free(r->y);
    free(r->offsets);
    free(r->copies);
    free(r->tokens[0]);
    free(r->doc_starts);
    hl_tensor_free(r->doc_ids);
    free(r->tokens[1]);
    hl_token_file_close(r->files[0]);
    hl_token_file_close(r->files[1]);
    hl_vocab_free(r->vocab);
    hl_eval_set_free(r->val_set);
    hl_graph_free(r->g);
    free(r->rank_dropout);
    hl_optim_free(r->opt);
    hl_gpt_free(r->m);
}

int main(int argc, char **argv)
{
    hl_dist_init(&argc, &argv);
    hl_cli_init();
    options o = parse_options(argc, argv);
    const int tuner_threads = hl_cli_set_threads(o.threads);
    run r;
    setup(&r, &o);
    hl_thread_tuner_init(&r.tuner, tuner_threads);
    train(&r);
    if (r.lead && o.sample > 0) {
        printf("--- sample (temperature %.2f) ---\n", o.temperature);
        sample_text(r.g, r.m, r.vocab, o.prompt, o.sample, o.temperature, &r.data_rng);
    }
    const int rc = r.lead ? finish(&r) : 0;
    teardown(&r);
    hl_dist_finalize();
    return rc;
}
