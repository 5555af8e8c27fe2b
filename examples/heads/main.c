/*
 * heads: what each attention head of a trained model does and is worth —
 * detectors, attention maps, composition circuits, one report page; ablation,
 * importance and pruning.
 *
 *     build/heads scores     --model FILE [--data FILE] [--out DIR]
 *     build/heads maps       --model FILE (--text STR | --data FILE [--offset N]) [--heads L.H,...]
 *     build/heads circuits   --model FILE [--out DIR]
 *     build/heads report     --model FILE [--data FILE] [--curve] --out DIR
 *     build/heads ablate     --model FILE [--heads L.H,...] [--data FILE] [--out DIR]
 *     build/heads importance --model FILE [--data FILE] [--out DIR]
 *     build/heads prune      --model FILE --heads L.H,... [--data FILE] [--out DIR]
 *     build/heads prune      --model FILE --curve [--step-fraction X] [--finetune N] ...
 *     build/heads patch      --model FILE [--act z,q,k,v,pattern,resid] [--per-position] ...
 *     build/heads paths      --model FILE [--act q,k,v] ...
 *     build/heads attrib     --model FILE [--act z,...] ...
 *     build/heads logit-lens --model FILE ...
 *
 * The evaluation set: for a toy_heads model, the toy generator (by default
 * toy_heads' own held-out set, 1000 sequences from seed 1000003), scored on
 * the repeated half ("scored" targets) and on the rest ("other"); for a
 * charlm model, --data FILE cut into evenly spaced windows of n_ctx+1 tokens
 * (a text, or a token file of build/tokenize, read whole).
 * Heads are named L<layer>H<head> by their index in the model as trained, also
 * after pruning. Writes into DIR (default out/heads): ablation.csv,
 * importance.csv and importance.png, pruned.safetensors, prune_curve.csv and
 * prune_curve.png. Run with --help for every option.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "examples/heads/heads.h"

static const hl_usage usage = {
        "usage: heads scores     --model FILE [--data FILE] [options]\n"
        "       heads maps       --model FILE (--text STR | --data FILE [--offset N])\n"
        "                        [--heads L.H,...]\n"
        "       heads circuits   --model FILE [options]\n"
        "       heads report     --model FILE [--data FILE] [--curve] --out DIR\n"
        "       heads ablate     --model FILE [--heads L.H,...] [options]\n"
        "       heads importance --model FILE [options]\n"
        "       heads prune      --model FILE --heads L.H,... [options]\n"
        "       heads prune      --model FILE --curve [--step-fraction X] [--finetune N]\n"
        "       heads eval       --model M (--text STR | --token-ids FILE) [--out DIR]\n"
        "       heads generate   --model M --prompt STR [--tokens N] [--temperature X]\n"
        "                        [--top-k K] [--seed N] [--ignore-eos]\n"
        "       heads export     --model M --out DIR\n"
        "       heads patch      --model FILE [TASK] [--act LIST] [--per-position]\n"
        "       heads paths      --model FILE [TASK] [--act q,k,v]\n"
        "       heads attrib     --model FILE [TASK] [--act LIST]\n"
        "       heads logit-lens --model FILE [TASK]\n"
        "What each attention head of a toy_heads or charlm model does and is worth.\n"
        "Heads are named L<layer>H<head> by their index as trained, in every command and\n"
        "file; --heads takes L1H3 or 1.3. A pruned model's heads keep their names.\n"
        "  scores      detectors for every head on the induction probe (random tokens\n"
        "              repeated once: toy models 15 of their 16 tokens after BOS, charlm\n"
        "              models n_ctx/2 letters a..z, or learnt words for a model of\n"
        "              charlm --vocab), with --data also on windows of the text:\n"
        "              previous_token A[t,t-1]; two_back A[t,t-2];\n"
        "              duplicate_token, attention to earlier copies of the query's token;\n"
        "              induction, on the probe attention from\n"
        "              a second-half token to the token after its first occurrence, on text\n"
        "              to tokens after copies of the query's token 4 or more back; copying, from\n"
        "              the weights: sum(l)/sum(|l|) over the eigenvalues l of the OV circuit\n"
        "              W_U W_O W_V W_E (Olsson et al. 2022; +1 = raises the logit of the\n"
        "              token attended to); first_token A[t,0]; local, within 3 back; self;\n"
        "              entropy (nats). Role thresholds: previous-token >= 0.5,\n"
        "              two-back >= 0.5, duplicate-token >= 0.5, induction >= 0.3,\n"
        "              copying >= 0.5, first-token >= 0.5, local >= 0.7 (neither\n"
        "              previous-token nor two-back), self >= 0.5.\n"
        "              The _tl columns: previous-token, duplicate-token and induction as\n"
        "              TransformerLens's detect_head computes them (\"mul\": sum(A*P)/sum(A)\n"
        "              over every row, the mean over sequences; no role thresholds).\n"
        "              A role table; scores.csv, scores.png (scores_text.* with --data)\n"
        "  maps        each head's attention on the input (at most n_ctx tokens; text\n"
        "              in the model's vocabulary for charlm, token numbers for other\n"
        "              models), tokens on the axes:\n"
        "              attn_L<l>H<h>.png, maps_grid.png, maps.csv (each query's top key)\n"
        "  circuits    Q-, K-, V-composition between heads of different layers (Elhage et\n"
        "              al. 2021, as TransformerLens: |W_OV W_QK|_F/(|W_OV|_F |W_QK|_F),\n"
        "              LayerNorm gains folded) with a random baseline; each later head's\n"
        "              own detector with each earlier head ablated: composition.csv,\n"
        "              composition_{q,k,v}.png, circuit.png, ablation_effects.csv\n"
        "  report      all of it on one self-contained page: report.html\n"
        "  eval        the mean next-token loss (nats per token) on --text or on the\n"
        "              sequences of --token-ids FILE (one a line, decimal ids separated by\n"
        "              spaces, one length), the ids read, and eval.safetensors: logits\n"
        "              (B,T,V) float32 and input_ids, to compare with PyTorch\n"
        "  generate    --tokens N (32) tokens after --prompt, sampled from softmax(logits /\n"
        "              --temperature X) (1; 0: the most likely) over the --top-k K (0: all)\n"
        "              most likely, seed --seed N, with a key/value cache, stopping at the\n"
        "              model's end-of-sequence token (--ignore-eos: not); prints the text\n"
        "              and tokens/s\n"
        "  export      the model as a Hugging Face folder in --out DIR: config.json and\n"
        "              model.safetensors (GPT2LMHeadModel, GPTNeoXForCausalLM,\n"
        "              LlamaForCausalLM or Qwen2ForCausalLM, whichever expresses it)\n"
        "  ablate      loss and accuracy with each head (or the --heads set together)\n"
        "              gated to 0 (zero ablation) and replaced by its mean output (mean\n"
        "              ablation), against the unablated model: a ranked table, ablation.csv\n"
        "  importance  mean |dL/dgate| per head, normalised per layer (Michel et al.\n"
        "              2019): a ranked table, importance.csv, importance.png\n"
        "  prune       removes the --heads set from the weights and writes the smaller\n"
        "              model to pruned.safetensors; with --curve, prunes the least\n"
        "              important heads step by step: prune_curve.csv, prune_curve.png\n"
        "  patch       activation patching from the clean input into the corrupted one,\n"
        "              one head at a time (--per-position: one head and query position),\n"
        "              of z (head output before W_O), q, k, v or pattern, or of the\n"
        "              residual stream per (layer, position): the metric normalised,\n"
        "              (patched - corrupted) / (clean - corrupted); patch_<act>.csv, .png\n"
        "  paths       path patching: sender head A's clean output reaching receiver B\n"
        "              only through B's q, k or v (everything else corrupted):\n"
        "              paths_<act>.csv and a senders x receivers paths_<act>.png; every\n"
        "              head a sender, or those of --heads L.H,... (one pass per sender\n"
        "              and later layer's receiver: a few senders of a large model)\n"
        "  attrib      attribution patching, (a_clean - a_corrupted) . dmetric/da at\n"
        "              the corrupted run, beside activation patching, with their\n"
        "              correlation: attrib_<act>.csv\n"
        "  logit-lens  on the clean input: each layer's residual stream read through the\n"
        "              final LayerNorm and unembedding (metric and top tokens), and each\n"
        "              head's direct logit attribution: logit_lens.csv, dla.csv\n"
        "TASK (patch, paths, attrib, logit-lens): by default the induction task,\n"
        "  --sequences N (20) sequences of random tokens repeated once, corrupted by\n"
        "  drawing the first half again, scored on the second half; or two inputs of one\n"
        "  length, --clean STR --corrupt STR (charlm: texts; other models: token numbers,\n"
        "  e.g. \"16 3 5 3\"), scored at --positions (default the last token with a\n"
        "  successor); or many such pairs, --pairs FILE, one a line:\n"
        "      clean<TAB>corrupt[<TAB>positions]\n"
        "  texts with the escapes \\t \\n \\\\ \\xNN (bytes below 0x20 must be escaped)\n"
        "  or token numbers as for --clean; positions as for --positions (\"3,7\"; default\n"
        "  the last with a successor); empty lines and lines starting with # skipped. The\n"
        "  two inputs of a pair have one length; pairs may differ (each is padded after\n"
        "  its end, which a causal model never reads back, and padding is not scored).\n"
        "  Scores: the metric's mean over every pair's scored positions, normalised as\n"
        "  above; pairs.csv: each pair's own clean and corrupted metric.\n"
        "Options:\n",
    "Exit status: 0 done, 1 failed while running, 2 bad input (found before anything is\n"
    "written) or a file that cannot be read or written.\n",
};

/* The first flag given of a group (flags that only some uses accept), or NULL. */
static const char *first_given(const hl_opt *opts, const char *const *names)
{
    for (const char *const *n = names; *n; n++)
        for (const hl_opt *o = opts; o->name; o++)
            if (!strcmp(o->name, *n) && *o->given)
                return *n;
    return NULL;
}

static const char *const command_names[CMD_COUNT] = {
    "ablate", "importance", "prune", "scores", "maps", "circuits", "report",
    "eval", "generate", "export", "patch", "paths", "attrib", "logit-lens"};

static command parse_command(int argc, char **argv)
{
    const char *const *names = command_names;
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
        return CMD_COUNT; /* the usage, printed by parse_options */
    /* The message and where to read more, not the whole usage. */
    if (argc < 2)
        heads_bad_input("give a command: scores, maps, circuits, report, ablate, importance, "
                        "prune, eval, generate, export, patch, paths, attrib or logit-lens (heads "
                        "--help for the rest)");
    for (int c = 0; c < CMD_COUNT; c++)
        if (!strcmp(argv[1], names[c]))
            return (command)c;
    heads_bad_input("unknown command %s (scores, maps, circuits, report, ablate, importance, "
                    "prune, eval, generate, export, patch, paths, attrib or logit-lens; heads "
                    "--help for the rest)", argv[1]);
}

#define ON(c) (1u << (c))
#define PATCHING (ON(CMD_PATCH) | ON(CMD_PATHS) | ON(CMD_ATTRIB) | ON(CMD_LOGIT_LENS))
#define STUDY (ON(CMD_ABLATE) | ON(CMD_IMPORTANCE) | ON(CMD_PRUNE) | ON(CMD_REPORT))

/* The flags that only some commands read: given to another, one would be
 * ignored, so it is refused (exit 2), naming the commands that read it. */
static void check_flag_commands(const options *o, const hl_opt *opts)
{
    const unsigned curve = o->curve ? ON(CMD_PRUNE) | ON(CMD_REPORT) : 0;
    const struct {
        const char *flag;
        unsigned commands;
        const char *readers;
    } rules[] = {
        {"seed", STUDY | ON(CMD_GENERATE) | (o->clean || o->pairs ? 0 : PATCHING),
         "ablate, importance, prune and report (toy models), generate, and the induction task "
         "of patch, paths, attrib and logit-lens (without --clean or --pairs) read it"},
        {"sequences",
         STUDY | ON(CMD_SCORES) | ON(CMD_CIRCUITS) | (o->clean || o->pairs ? 0 : PATCHING),
         "ablate, importance, prune, report, scores, circuits, and the induction task of patch, "
         "paths, attrib and logit-lens read it"},
        {"batch", STUDY, "ablate, importance, prune and report read it"},
        {"windows", STUDY | ON(CMD_SCORES), "ablate, importance, prune, report and scores read it"},
        {"timing-runs", ON(CMD_PRUNE) | (o->curve ? ON(CMD_REPORT) : 0),
         "prune and report --curve read it"},
        {"out", ~ON(CMD_GENERATE), "generate writes no file"},
        {"data", STUDY | ON(CMD_SCORES) | ON(CMD_MAPS),
         "ablate, importance, prune, report, scores and maps read it"},
        {"repeat", ON(CMD_ABLATE) | ON(CMD_IMPORTANCE), "ablate and importance read it"},
        {"token-ids", ON(CMD_EVAL), "eval reads it"},
        {"step-fraction", curve, "prune and report with --curve read it"},
        {"finetune", curve, "prune and report with --curve read it"},
        {"lr", o->finetune ? curve : 0, "prune and report --curve with --finetune N read it"},
        {"finetune-data", o->finetune ? curve : 0,
         "prune and report --curve with --finetune N read it"},
    };
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (first_given(opts, (const char *const[]){rules[i].flag, NULL}) &&
            !(rules[i].commands & ON(o->cmd)))
            heads_bad_input("%s does not read --%s (%s)", command_names[o->cmd],
                            rules[i].flag, rules[i].readers);
}

/* The combinations of flags that make no sense; exits 2 on one. */
static void check_combinations(const options *o, const hl_opt *opts)
{
    static const char *const curve_only[] = {"step-fraction", "finetune", "finetune-data", "lr",
                                             NULL};
    static const char *const toy_only[] = {"seed", "sequences", NULL};
    static const char *const text_only[] = {"windows", "finetune-data", "repeat", NULL};
    const char *curve_flag = first_given(opts, curve_only), *toy_flag = first_given(opts, toy_only);
    const char *text_flag = first_given(opts, text_only);
    if (!o->model)
        heads_bad_input("--model FILE is required");
    const bool patching = o->cmd >= CMD_PATCH;
    static const char *const patch_only[] = {"act", "clean", "corrupt", "positions", "metric",
                                             "pairs", "per-position", NULL};
    const char *patch_flag = first_given(opts, patch_only);
    if (patch_flag && !patching)
        heads_bad_input("--%s belongs to patch, paths, attrib and logit-lens", patch_flag);
    if (patching && ((o->heads && o->cmd != CMD_PATHS) || o->data || o->text || o->curve))
        heads_bad_input("patch, paths, attrib and logit-lens look at every head on their task "
                        "(paths takes --heads as its senders): drop --heads, --data, --text "
                        "and --curve");
    if (!o->clean != !o->corrupt)
        heads_bad_input("give --clean and --corrupt together");
    if (o->pairs && o->clean)
        heads_bad_input("give one task: --pairs FILE or --clean and --corrupt, not both");
    if (o->pairs && o->positions)
        heads_bad_input("--pairs FILE gives each pair's positions in its third field: drop "
                        "--positions");
    if (o->positions && !o->clean)
        heads_bad_input("--positions belongs to the text task (--clean, --corrupt)");
    if (o->per_position && o->cmd != CMD_PATCH)
        heads_bad_input("--per-position belongs to patch");
    if (o->metric && strcmp(o->metric, "loss") && strcmp(o->metric, "logit-diff"))
        heads_bad_input("unknown --metric %s (loss or logit-diff)", o->metric);
    if (o->act && o->cmd == CMD_LOGIT_LENS)
        heads_bad_input("logit-lens reads the residual stream and every head: drop --act");
    if (o->curve && o->cmd != CMD_PRUNE && o->cmd != CMD_REPORT)
        heads_bad_input("--curve belongs to the prune and report commands");
    const bool generating = o->cmd == CMD_GENERATE;
    static const char *const sampling[] = {"tokens", "top-k", "temperature", "ignore-eos",
                                           NULL};
    const char *sampling_flag = first_given(opts, sampling);
    if (!generating && sampling_flag)
        heads_bad_input("--%s belongs to generate", sampling_flag);
    if (!generating && o->prompt)
        heads_bad_input("--prompt belongs to generate");
    if (generating && !o->prompt)
        heads_bad_input("generate needs --prompt STR");
    if (o->cmd == CMD_EVAL || o->cmd == CMD_EXPORT || generating) {
        if (o->data || o->heads || o->curve || o->offset || (generating && o->text))
            heads_bad_input("eval, generate and export take --model, --out and (eval) --text "
                            "or --token-ids, (generate) --prompt and its sampling flags");
        if (o->cmd == CMD_EVAL && o->text && o->token_ids)
            heads_bad_input("give one of --text and --token-ids, not both");
        if (o->cmd == CMD_EVAL && !o->text && !o->token_ids)
            heads_bad_input("eval needs its input: --text STR or --token-ids FILE");
        if (o->cmd == CMD_EXPORT && (o->text || o->token_ids))
            heads_bad_input("export writes the model alone: drop --text and --token-ids");
        check_flag_commands(o, opts);
        return;
    }
    if (o->token_ids)
        heads_bad_input("--token-ids belongs to eval");
    if ((o->text || o->offset) && o->cmd != CMD_MAPS && o->cmd != CMD_REPORT)
        heads_bad_input("--text and --offset belong to the maps, report and eval commands");
    if (o->text && o->data)
        heads_bad_input("give one of --text and --data, not both");
    if (o->cmd == CMD_MAPS && !o->text && !o->data)
        heads_bad_input("maps needs the input: --text STR or --data FILE");
    if (o->offset && !o->data)
        heads_bad_input("--offset is a position in --data FILE");
    if (o->repeat && o->cmd != CMD_ABLATE && o->cmd != CMD_IMPORTANCE)
        heads_bad_input("--repeat belongs to the ablate and importance commands");
    if (o->heads && (o->cmd == CMD_SCORES || o->cmd == CMD_CIRCUITS || o->cmd == CMD_REPORT))
        heads_bad_input("%s looks at every head; --heads is for maps, ablate and prune",
                        o->cmd == CMD_SCORES ? "scores" : o->cmd == CMD_CIRCUITS ? "circuits"
                                                                                  : "report");
    if (curve_flag && !o->curve)
        heads_bad_input("--%s belongs to prune --curve", curve_flag);
    const bool probing = o->cmd == CMD_SCORES || o->cmd == CMD_CIRCUITS || o->cmd == CMD_REPORT;
    const bool probe_size = probing && toy_flag && !strcmp(toy_flag, "sequences");
    if (o->data && toy_flag && o->cmd != CMD_MAPS && !probe_size)
        heads_bad_input("--%s is for toy models; with --data the text is the evaluation set",
                        toy_flag);
    if (!o->data && text_flag)
        heads_bad_input("--%s is for text models, evaluated on --data FILE", text_flag);
    if (o->cmd == CMD_IMPORTANCE && o->heads)
        heads_bad_input("importance scores every head; --heads is for ablate and prune");
    if (o->cmd == CMD_PRUNE && !o->curve && !o->heads)
        heads_bad_input("prune needs --heads L.H,... (or --curve)");
    if (o->curve && o->heads)
        heads_bad_input("prune --curve chooses the heads itself; drop --heads");
    check_flag_commands(o, opts);
}

static options parse_options(int argc, char **argv)
{
    options o = {.cmd = parse_command(argc, argv), .out = "out/heads",
                 .seed = HL_TOY_HELDOUT_SEED, .sequences = HL_TOY_HELDOUT_SEQUENCES,
                 .windows = 64, .timing_runs = 5, .step_fraction = 0.1, .lr = 1e-3,
                 .tokens = 32, .temperature = 1};
    bool given[40] = {false};
    hl_opt opts[] = {
        HL_OPTION_TEXT("model", &o.model, "FILE",
                       "model.safetensors or checkpoint.safetensors (toy_heads, charlm, or a "
                       "model pruned by this program), or a Hugging Face folder (config.json and "
                       "model.safetensors)", .dflt = "required"),
        HL_OPTION_TEXT("token-ids", &o.token_ids, "FILE", "eval: sequences of token ids, one a line"),
        HL_OPTION_TEXT("prompt", &o.prompt, "STR", "generate: the text to continue"),
        HL_OPTION_INT("tokens", &o.tokens, 1, 1000000, "N", "generate: tokens to sample"),
        HL_OPTION_REAL("temperature", &o.temperature, 0, 100, "X",
                       "generate: logits divided by X (0 takes the most likely)"),
        HL_OPTION_INT("top-k", &o.top_k, 0, 10000000, "K",
                      "generate: sample among the K most likely (0: all)"),
        HL_OPTION_FLAG("ignore-eos", &o.ignore_eos,
                       "generate: go on past the model's end-of-sequence token"),
        HL_OPTION_TEXT("out", &o.out, "DIR", "where the files go"),
        HL_OPTION_TEXT("heads", &o.heads, "L.H,...",
                       "heads by layer and head index, e.g. 1.3,0.2 or L1H3,L0H2"),
        HL_OPTION_TEXT("text", &o.text, "STR",
                       "maps, report, eval: the input (charlm: text, in the model's "
                       "vocabulary)"),
        HL_OPTION_INT("offset", &o.offset, 0, 2147483647, "N",
                      "maps, report with --data: the token the input starts at"),
        HL_OPTION_TEXT("data", &o.data, "FILE",
                       "charlm models: the text to evaluate on (scores: detectors on its windows "
                       "too; maps: the input); a token file of build/tokenize is read as its "
                       "tokens (its vocabulary must be the model's)"),
        HL_OPTION_INT("windows", &o.windows, 1, 1000000, "N",
                      "charlm: evenly spaced windows of n_ctx+1 tokens"),
        HL_OPTION_FLAG("repeat", &o.repeat,
                       "ablate, importance on charlm: instead, windows of n_ctx/2 tokens each "
                       "followed by itself, scored on the second half (\"repeat\") and the first "
                       "(\"first\"; importance sums both)"),
        HL_OPTION_INT("seed", &o.seed, 0, 2147483647, "N",
                      "toy models: seed of the evaluation sequences (toy_heads' held-out set); "
                      "generate: the sampling's; the induction task: its sequences'"),
        HL_OPTION_INT("sequences", &o.sequences, 1, 1000000, "N",
                      "toy models: evaluation sequences (1000); scores and circuits, and "
                      "report on a text model: the probe's sequences (100, fewer past 256 "
                      "positions); the "
                      "induction task of patch, paths, attrib and logit-lens: its sequences (20)",
                      .dflt = ""),
        HL_OPTION_INT("batch", &o.batch, 1, 100000, "N",
                      "sequences per forward pass; the importance takes one backward pass per "
                      "batch", .dflt = "toy 250, charlm 16"),
        HL_OPTION_INT("threads", &o.threads, 1, HL_CLI_MAX_THREADS, "N", "OpenMP threads",
                      .dflt = "OMP_NUM_THREADS, else all cores"),
        HL_OPTION_TEXT("act", &o.act, "LIST",
                       "activations: z, q, k, v, pattern, resid (patch: z; paths: q,k,v)",
                       .group = "patch, paths, attrib, logit-lens:"),
        HL_OPTION_FLAG("per-position", &o.per_position, "patch, one (head, position) at a time"),
        HL_OPTION_TEXT("metric", &o.metric, "NAME",
                       "loss (of the answer) or logit-diff (answer minus wrong token: the "
                       "corrupted text's next byte, or for the induction task what the corrupted "
                       "first half predicts)", .dflt = "loss"),
        HL_OPTION_TEXT("clean", &o.clean, "STR", "the two-input task's clean input (TASK above)"),
        HL_OPTION_TEXT("corrupt", &o.corrupt, "STR", "its corrupted input, of the same length"),
        HL_OPTION_TEXT("positions", &o.positions, "LIST", "its scored positions (\"3,7\")",
                       .dflt = "the last with a next token"),
        HL_OPTION_TEXT("pairs", &o.pairs, "FILE", "a file of pairs (TASK above); not with --clean"),
        HL_OPTION_FLAG("curve", &o.curve,
                       "prune: remove the least important heads step by step (prune_curve.csv, "
                       "prune_curve.png); report: add the pruning curve",
                       .group = "prune --curve:"),
        HL_OPTION_REAL("step-fraction", &o.step_fraction, 1e-6, 1, "X",
                       "share of the remaining heads pruned per step (at least one head per step, "
                       "never a layer's last head)"),
        HL_OPTION_INT("finetune", &o.finetune, 0, 10000000, "N",
                      "AdamW steps after each pruning step"),
        HL_OPTION_TEXT("finetune-data", &o.finetune_data, "FILE",
                       "charlm: the text to fine-tune on (required with --finetune)"),
        HL_OPTION_REAL("lr", &o.lr, 0, 10, "X", "fine-tuning learning rate"),
        HL_OPTION_INT("timing-runs", &o.timing_runs, 1, 1000, "N",
                      "timed forward passes per point; the median is kept"),
        {0},
    };
    for (int i = 0; opts[i].name; i++)
        opts[i].given = &given[i];
    if (o.cmd == CMD_COUNT) { /* heads --help */
        hl_cli_usage(stdout, &usage, opts);
        hl_cli_print_kernels(stdout);
        exit(0);
    }
    /* The flags after the command: argv[2..]. */
    hl_cli_parse_or_exit("heads", &usage, opts, argc - 1, argv + 1);
    check_combinations(&o, opts);
    /* The induction task's sequences: fewer than an evaluation set's. */
    if (o.cmd >= CMD_PATCH && !first_given(opts, (const char *const[]){"sequences", NULL}))
        o.sequences = 20;
    o.metric_diff = o.metric && !strcmp(o.metric, "logit-diff");
    o.sequences_given = first_given(opts, (const char *const[]){"sequences", NULL}) != NULL;
    return o;
}

/* --out must be a directory this run can write into, or a path mkdir -p can
 * make: checked before any work (a model can take minutes to load and run),
 * created by each command only once its inputs are known to be good, so
 * bad input leaves nothing behind. Exits 2 otherwise. */
static void check_out_dir(const char *out)
{
    char dir[4096];
    if (!*out)
        heads_bad_input("--out is empty");
    if (snprintf(dir, sizeof dir, "%s", out) >= (int)sizeof dir)
        heads_bad_input("cannot create --out %.64s...: %s", out, strerror(ENAMETOOLONG));
    /* The nearest part of the path that exists, where the rest will be made. */
    struct stat st;
    while (stat(dir, &st) != 0) {
        if (errno != ENOENT)
            heads_bad_input("cannot create %s: %s", out, strerror(errno));
        if (lstat(dir, &st) == 0) /* a link to nothing: no folder can be made there */
            heads_bad_input("cannot create %s: %s is a symbolic link to a missing path", out,
                            dir);
        char *slash = strrchr(dir, '/');
        if (!slash)
            strcpy(dir, ".");
        else
            slash[slash == dir] = '\0'; /* "/x" leaves "/" */
    }
    if (!S_ISDIR(st.st_mode)) /* out itself: stat fails below a file with ENOTDIR */
        heads_bad_input("--out %s is not a directory", out);
    if (access(dir, W_OK | X_OK) != 0)
        heads_bad_input("cannot write into %s: %s", dir, strerror(errno));
}

int main(int argc, char **argv)
{
    hl_cli_init();
    options o = parse_options(argc, argv);
    if (o.cmd != CMD_GENERATE) /* generate prints its text and writes nothing */
        check_out_dir(o.out);
    hl_cli_set_threads(o.threads);
    switch (o.cmd) {
    case CMD_SCORES: return heads_run_scores(&o);
    case CMD_MAPS: return heads_run_maps(&o);
    case CMD_CIRCUITS: return heads_run_circuits(&o);
    case CMD_REPORT: return heads_run_report(&o);
    case CMD_PATCH: return heads_run_patch(&o);
    case CMD_PATHS: return heads_run_paths(&o);
    case CMD_ATTRIB: return heads_run_attrib(&o);
    case CMD_LOGIT_LENS: return heads_run_logit_lens(&o);
    case CMD_EVAL: return heads_run_eval(&o);
    case CMD_GENERATE: return heads_run_generate(&o);
    case CMD_EXPORT: return heads_run_export(&o);
    default: break;
    }
    study s = heads_open_study(&o);
    int rc = o.cmd == CMD_ABLATE       ? heads_run_ablate(&o, &s)
             : o.cmd == CMD_IMPORTANCE ? heads_run_importance(&o, &s)
             : o.curve                 ? heads_run_prune_curve(&o, &s)
                                       : heads_run_prune_once(&o, &s);
    heads_close_study(&s);
    return rc;
}
