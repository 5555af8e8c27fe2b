/* heads ablate: zero and mean ablation of each head or of a set. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/heads/heads.h"

/* A text model's numbers beside loss and accuracy: each group's loss per
 * byte and, on text windows, the ICL score per token and per byte. */
typedef struct {
    double loss_per_byte[HL_EVAL_MAX_GROUPS];
    double icl, icl_per_byte;
} text_numbers;

typedef struct {
    char name[1024];
    hl_head_set heads;
    hl_eval_result zero, mean;
    text_numbers zero_text, mean_text;
} ablation_row;

/* What a study of a text model measures besides loss and accuracy. */
typedef struct {
    bool text;                               /* a text model */
    bool per_byte;                           /* tokens longer than a byte: also per byte */
    bool icl;                                /* on text windows: the ICL score */
    bool icl_short;                          /* text windows too short to have one */
    double bytes_per_target[HL_EVAL_MAX_GROUPS];
    double *position_bytes;                  /* (T) */
    double *position_loss;                   /* (T) scratch */
} text_measure;

/* hl_heads_evaluate with the text numbers, when the study has them. */
static void evaluate(const study *s, const text_measure *tm, const hl_head_set *heads,
                     const hl_head_means *means, hl_eval_result *r, text_numbers *t)
{
    hl_error err = {0};
    if (hl_heads_evaluate_positions(s->m, s->set, heads, means,
                                    tm->icl ? tm->position_loss : NULL, r, &err) != HL_OK)
        heads_fail(&err);
    if (!tm->text)
        return;
    for (int k = 0; k < s->set->n_groups; k++)
        t->loss_per_byte[k] = r->loss[k] / tm->bytes_per_target[k];
    if (tm->icl) {
        t->icl = hl_eval_icl_score(tm->position_loss, NULL, s->set->T);
        t->icl_per_byte = hl_eval_icl_score(tm->position_loss, tm->position_bytes, s->set->T);
    }
}

static text_measure text_measure_open(const study *s)
{
    text_measure tm = {.text = s->meta.vocab && s->text};
    tm.per_byte = tm.text && hl_vocab_size(s->meta.vocab) > HL_VOCAB_BYTES;
    /* text windows, not repeated text, long enough for both of its ranges */
    tm.icl = tm.text && s->set->n_groups == 1 && s->set->T >= 9;
    tm.icl_short = tm.text && s->set->n_groups == 1 && !tm.icl;
    if (!tm.text)
        return tm;
    const int V = hl_vocab_size(s->meta.vocab), T = s->set->T;
    double *token_bytes = malloc(sizeof *token_bytes * (size_t)V);
    tm.position_bytes = malloc(sizeof(double) * (size_t)T);
    tm.position_loss = malloc(sizeof(double) * (size_t)T);
    if (!token_bytes || !tm.position_bytes || !tm.position_loss) {
        fprintf(stderr, "heads: out of memory\n");
        exit(1);
    }
    hl_vocab_token_bytes(s->meta.vocab, token_bytes);
    for (int k = 0; k < s->set->n_groups; k++)
        tm.bytes_per_target[k] = hl_eval_mean_weight(s->set, k, token_bytes);
    hl_eval_position_weights(s->set, token_bytes, tm.position_bytes);
    free(token_bytes);
    return tm;
}

static void text_measure_close(text_measure *tm)
{
    free(tm->position_bytes);
    free(tm->position_loss);
}

static int by_zero_damage(const void *pa, const void *pb)
{
    const ablation_row *a = pa, *b = pb;
    double da = a->zero.loss[0], db = b->zero.loss[0];
    return da < db ? 1 : da > db ? -1 : strcmp(a->name, b->name);
}

/* "3.0512 (+2.7017)  0.0904" for each group. */
static void print_cells(const hl_eval_set *set, const hl_eval_result *r, const hl_eval_result *base)
{
    for (int k = 0; k < set->n_groups; k++)
        printf("  %7.4f (%+7.4f) %6.4f", r->loss[k], r->loss[k] - base->loss[k], r->accuracy[k]);
}

static void write_ablation_csv(FILE *f, const hl_eval_set *set, const text_measure *tm,
                               const char *heads, const char *kind, const hl_eval_result *r,
                               const hl_eval_result *base, const text_numbers *t)
{
    fprintf(f, "%s,%s", heads, kind);
    for (int k = 0; k < set->n_groups; k++)
        fprintf(f, ",%.6f,%.6f", r->loss[k], r->accuracy[k]);
    for (int k = 0; k < set->n_groups; k++)
        fprintf(f, ",%.6f", r->loss[k] - base->loss[k]);
    for (int k = 0; tm->per_byte && k < set->n_groups; k++)
        fprintf(f, ",%.6f", t->loss_per_byte[k]);
    if (tm->icl)
        fprintf(f, ",%.6f", t->icl);
    if (tm->icl && tm->per_byte)
        fprintf(f, ",%.6f", t->icl_per_byte);
    fprintf(f, "\n");
}

/* The baseline's loss per byte of each group and its ICL score. */
static void print_text_numbers(const hl_eval_set *set, const text_measure *tm,
                               const text_numbers *t)
{
    if (tm->per_byte) {
        printf("per byte:");
        for (int k = 0; k < set->n_groups; k++)
            printf("%s %s loss %.4f nats/byte (%.3f bytes per target)", k ? ";" : "",
                   set->group_names[k], t->loss_per_byte[k], tm->bytes_per_target[k]);
        printf("\n");
    }
    if (tm->icl_short) {
        printf("ICL score: none (a context of %d positions has no early range; 9 at least)\n",
               set->T);
    } else if (tm->icl) {
        int e0, e1, l0, l1;
        hl_eval_icl_ranges(set->T, &e0, &e1, &l0, &l1);
        printf("ICL score (loss at positions %d..%d minus %d..%d): %.4f nats/token", l0,
               l1 - 1, e0, e1 - 1, t->icl);
        if (tm->per_byte)
            printf(", %.4f nats/byte", t->icl_per_byte);
        printf("\n");
    }
}

int heads_run_ablate(const options *o, study *s)
{
    hl_error err = {0};
    const hl_eval_set *set = s->set;
    const hl_gpt_config *c = &s->m->cfg;
    ablation_row *rows = calloc((size_t)heads_total(s->m) + 1, sizeof *rows);
    if (!rows)
        return fprintf(stderr, "heads: out of memory\n"), 1;
    int n = 0;
    if (o->heads) {
        rows[0].heads = heads_parse_list(s->m, o->heads);
        for (int l = 0; l < c->n_layers; l++)
            for (int h = 0; h < hl_gpt_layer_heads(c, l); h++)
                if (rows[0].heads.on[l][h]) {
                    char name[HL_HEAD_NAME_MAX];
                    snprintf(rows[0].name + strlen(rows[0].name),
                             sizeof rows[0].name - strlen(rows[0].name), "%s%s",
                             rows[0].name[0] ? "+" : "", hl_head_name(s->m, l, h, name));
                }
        n = 1;
    } else {
        for (int l = 0; l < c->n_layers; l++)
            for (int h = 0; h < hl_gpt_layer_heads(c, l); h++, n++) {
                hl_head_name(s->m, l, h, rows[n].name);
                rows[n].heads.on[l][h] = true;
            }
    }
    heads_make_out_dir(o);
    heads_print_model(s, o->model);
    text_measure tm = text_measure_open(s);
    hl_eval_result base;
    text_numbers base_text = {0};
    hl_head_means means;
    evaluate(s, &tm, NULL, NULL, &base, &base_text);
    if (hl_heads_mean_outputs(s->m, set, &means, &err))
        heads_fail(&err);
    heads_print_result(set, "baseline", &base);
    if (tm.text)
        print_text_numbers(set, &tm, &base_text);
    for (int i = 0; i < n; i++) {
        evaluate(s, &tm, &rows[i].heads, NULL, &rows[i].zero, &rows[i].zero_text);
        evaluate(s, &tm, &rows[i].heads, &means, &rows[i].mean, &rows[i].mean_text);
    }
    hl_heads_means_free(&means);

    /* The CSV in model order, the table ranked by the zero ablation's damage. */
    text_out csv;
    FILE *f = heads_text_begin(&csv);
    fprintf(f, "heads,ablation");
    for (int k = 0; k < set->n_groups; k++)
        fprintf(f, ",%s_loss,%s_accuracy", set->group_names[k], set->group_names[k]);
    for (int k = 0; k < set->n_groups; k++)
        fprintf(f, ",delta_%s_loss", set->group_names[k]);
    for (int k = 0; tm.per_byte && k < set->n_groups; k++)
        fprintf(f, ",%s_loss_per_byte", set->group_names[k]);
    if (tm.icl)
        fprintf(f, ",icl_score");
    if (tm.icl && tm.per_byte)
        fprintf(f, ",icl_score_per_byte");
    fprintf(f, "\n");
    write_ablation_csv(f, set, &tm, "none", "none", &base, &base, &base_text);
    for (int i = 0; i < n; i++) {
        write_ablation_csv(f, set, &tm, rows[i].name, "zero", &rows[i].zero, &base,
                           &rows[i].zero_text);
        write_ablation_csv(f, set, &tm, rows[i].name, "mean", &rows[i].mean, &base,
                           &rows[i].mean_text);
    }
    qsort(rows, (size_t)n, sizeof *rows, by_zero_damage);
    printf("\nranked by the zero ablation's %s loss; each cell: loss (change) accuracy\n",
           set->group_names[0]);
    int width = 6;
    for (int i = 0; i < n; i++)
        width = (int)strlen(rows[i].name) > width ? (int)strlen(rows[i].name) : width;
    printf("rank  %-*s", width, "heads");
    for (int kind = 0; kind < 2; kind++)
        for (int k = 0; k < set->n_groups; k++) {
            char label[40];
            snprintf(label, sizeof label, "%s: %s", kind ? "mean" : "zero", set->group_names[k]);
            printf("  %-24s", label);
        }
    if (tm.icl)
        printf("  %-17s  %-17s", "zero: ICL score", "mean: ICL score");
    printf("\n");
    for (int i = 0; i < n; i++) {
        printf("%4d  %-*s", i + 1, width, rows[i].name);
        print_cells(set, &rows[i].zero, &base);
        print_cells(set, &rows[i].mean, &base);
        if (tm.icl)
            printf("  %7.4f (%+7.4f)  %7.4f (%+7.4f)", rows[i].zero_text.icl,
                   rows[i].zero_text.icl - base_text.icl, rows[i].mean_text.icl,
                   rows[i].mean_text.icl - base_text.icl);
        printf("\n");
    }
    free(rows);
    text_measure_close(&tm);
    const int rc = heads_text_save(&csv, o->out, "ablation.csv");
    if (!rc)
        printf("wrote %s/ablation.csv\n", o->out);
    return rc;
}
