/* The induction probe: see probe.h. */
#include "tasks/probe.h"

#include <stdio.h>
#include <string.h>

#include "core/rng.h"

void hl_probe_free(hl_probe *p)
{
    hl_eval_set_free(p->set);
    memset(p, 0, sizeof *p);
}

hl_status hl_probe_new(const hl_gpt *m, const hl_probe_opts *opts, hl_probe *p, hl_error *err)
{
    memset(p, 0, sizeof *p);
    const hl_probe_opts o = opts ? *opts : (hl_probe_opts){.bos = -1};
    const int common = m->cfg.vocab_in < m->cfg.vocab_out ? m->cfg.vocab_in : m->cfg.vocab_out;
    const int lo = o.token_lo || o.token_hi ? o.token_lo : 0;
    const int hi = o.token_lo || o.token_hi ? o.token_hi : common;
    const int start = o.bos >= 0 ? 1 : 0;
    const int fit = (m->cfg.n_ctx - start) / 2;
    const int half = o.half ? o.half : fit < HL_REPEAT_HALF_MAX ? fit : HL_REPEAT_HALF_MAX;
    if (lo < 0 || hi > common || lo >= hi)
        return hl_error_set(err, HL_ERR_ARG, "probe: tokens %d..%d are not inside the model's "
                            "%d shared input and output tokens", lo, hi - 1, common);
    if (o.bos >= m->cfg.vocab_in)
        return hl_error_set(err, HL_ERR_ARG, "probe: BOS %d is not an input token (vocab_in %d)",
                            o.bos, m->cfg.vocab_in);
    if (half < 1 || start + 2 * half > m->cfg.n_ctx || o.sequences < 0 || o.batch < 0)
        return hl_error_set(err, HL_ERR_ARG, "probe: %d repeated tokens%s do not fit in the "
                            "model's context of %d", 2 * half, start ? " after BOS" : "",
                            m->cfg.n_ctx);
    /* 100 sequences, fewer past 256 positions (at least 8): the same tokens
     * in all, and the detectors' means settle on fewer long sequences. */
    const int T = start + 2 * half, longer = 25600 / T > 8 ? 25600 / T : 8;
    const int n = o.sequences ? o.sequences : T <= 256 ? 100 : longer;
    if (!(p->set = hl_eval_set_new(n, T, 1, o.batch ? o.batch : 50, err)))
        return err->status;
    if (hl_eval_set_add_repeats(p->set, err) != HL_OK) {
        hl_probe_free(p);
        return err->status;
    }
    snprintf(p->set->group_names[0], sizeof p->set->group_names[0], "repeat");
    hl_rng rng;
    hl_rng_seed(&rng, o.seed);
    for (int i = 0; i < n; i++) {
        int32_t *x = p->set->tokens + (size_t)i * T, *y = p->set->targets[0] + (size_t)i * T;
        if (start)
            x[0] = o.bos;
        for (int k = 0; k < half; k++)
            x[start + k] = x[start + half + k] = lo + (int32_t)hl_rng_below(&rng, (uint32_t)(hi - lo));
        for (int t = start + half - 1; t + 1 < T; t++)
            y[t] = x[t + 1]; /* predictable from the first half */
        p->set->repeats[i] = (hl_repeat){.begin = start + half, .end = T, .lag = half};
    }
    p->start = start;
    p->half = half;
    return HL_OK;
}

hl_probe_opts hl_probe_text_opts(const hl_vocab *vocab)
{
    const int size = hl_vocab_size(vocab);
    return size > HL_VOCAB_BYTES
               ? (hl_probe_opts){.bos = -1, .token_lo = HL_VOCAB_BYTES, .token_hi = size,
                                 .seed = 12345}
               : (hl_probe_opts){.bos = -1, .token_lo = 'a', .token_hi = 'z' + 1, .seed = 12345};
}
