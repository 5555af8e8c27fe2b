/* Detector scores of later heads with an earlier head ablated: see head_effects.h. */
#include "analysis/head_effects.h"

#include <stdlib.h>
#include <string.h>

#include "analysis/composition.h"
#include "analysis/heads.h"
#include "analysis/roles.h"

/* Every head's detectors with head (l, h) zero-ablated. */
static hl_status detect_without(const hl_gpt *m, const hl_eval_set *set, int l, int h,
                                hl_head_scores *out, hl_error *err)
{
    hl_head_set off = {0};
    off.on[l][h] = true;
    hl_heads_run r;
    if (hl_heads_run_ablate(&r, m, set->T, &off, NULL, err) != HL_OK)
        return err->status;
    hl_status s = hl_heads_detect(m, set, &r.run, out, err);
    hl_heads_run_free(&r);
    return s;
}

hl_status hl_heads_ablation_effects(const hl_gpt *m, const hl_eval_set *set,
                                    const hl_head_scores *scores, hl_ablation_effect **out,
                                    int *n, hl_error *err)
{
    *out = NULL;
    *n = 0;
    const hl_gpt_config *c = &m->cfg;
    const int L = c->n_layers, stride = c->n_heads, N = hl_gpt_total_heads(c);
    if (L < 2)
        return HL_OK;
    /* ablated[i]: every head's detectors with flat head i ablated (one pass each). */
    const size_t per = (size_t)L * stride;
    hl_head_scores *ablated = malloc(sizeof *ablated * per * (size_t)N);
    hl_ablation_effect *rows = malloc(sizeof *rows * (size_t)N * N);
    hl_status s = ablated && rows ? HL_OK
                                  : hl_error_set(err, HL_ERR_NOMEM, "ablation effects: out of memory");
    for (int sl = 0; s == HL_OK && sl < L - 1; sl++)
        for (int sh = 0; s == HL_OK && sh < hl_gpt_layer_heads(c, sl); sh++)
            s = detect_without(m, set, sl, sh,
                               ablated + per * (size_t)hl_gpt_head_index(c, sl, sh), err);
    int count = 0;
    for (int dl = 1; s == HL_OK && dl < L; dl++)
        for (int dh = 0; dh < hl_gpt_layer_heads(c, dl); dh++) {
            const hl_head_scores *before = &scores[dl * stride + dh];
            const hl_detector d = hl_head_main_detector(before);
            for (int sl = 0; sl < dl; sl++)
                for (int sh = 0; sh < hl_gpt_layer_heads(c, sl); sh++) {
                    const hl_head_scores *after =
                        ablated + per * (size_t)hl_gpt_head_index(c, sl, sh);
                    rows[count++] = (hl_ablation_effect){sl, sh, dl, dh, d, before->v[d],
                                                         after[dl * stride + dh].v[d]};
                }
        }
    free(ablated);
    if (s != HL_OK) {
        free(rows);
        return s;
    }
    *out = rows;
    *n = count;
    return HL_OK;
}
