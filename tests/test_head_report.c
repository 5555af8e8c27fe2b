/* Tests for analysis/head_maps.c and head_effects.c, report/head_files.c,
 * html.c and head_report.c and viz/diagram.c, and for the heads program's scores, maps,
 * circuits and report commands: maps label their axes with the input's
 * tokens, the report holds every section and opens in a real browser
 * (headless Chromium) with every picture decoded, and every command refuses
 * bad input with status 2 and writes nothing. HL_BUILD_DIR names the programs'
 * folder. */
#include <dirent.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/head_effects.h"
#include "analysis/heads.h"
#include "analysis/head_maps.h"
#include "analysis/roles.h"
#include "report/head_files.h"
#include "report/head_report.h"
#include "report/html.h"
#include "tests/head_models.h"
#include "tests/testutil.h"
#include "viz/diagram.h"
#include "viz/heatmap.h"
#include "viz/plot.h"

#ifndef HL_BUILD_DIR
#define HL_BUILD_DIR "build"
#endif

static char *fresh_dir(char buf[64])
{
    snprintf(buf, 64, "/tmp/hl_head_report_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(buf));
    return buf;
}

static void remove_dir(const char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static unsigned char *slurp(const char *path, size_t *n)
{
    unsigned char *b = hl_fs_read_file(path, n);
    ck_assert_msg(b, "cannot read %s", path);
    return b;
}

static uint8_t *read_png(const char *path, int *width, int *height)
{
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    ck_assert_msg(png_image_begin_read_from_file(&im, path), "cannot read %s", path);
    im.format = PNG_FORMAT_RGB;
    uint8_t *rgb = malloc(PNG_IMAGE_SIZE(im));
    ck_assert(rgb && png_image_finish_read(&im, NULL, rgb, 0, NULL));
    *width = (int)im.width;
    *height = (int)im.height;
    return rgb;
}

START_TEST(test_token_labels)
{
    char b[HL_TOKEN_LABEL_MAX];
    hl_vocab *bytes = hl_vocab_bytes();
    ck_assert_str_eq(hl_token_label('a', bytes, b), "a");
    ck_assert_str_eq(hl_token_label(' ', bytes, b), "' '");
    ck_assert_str_eq(hl_token_label('\n', bytes, b), "\\n");
    ck_assert_str_eq(hl_token_label(200, bytes, b), "\\xc8");
    ck_assert_str_eq(hl_token_label(7, bytes, b), "\\x07");
    ck_assert_str_eq(hl_token_label(12, NULL, b), "12");
    ck_assert_str_eq(hl_token_label(256, bytes, b), "256"); /* outside the vocabulary */
    /* Learnt words: the space before a word as "_", cut to fit. */
    hl_error err = {0};
    const char *text = " the the Abcdefghijklmnopqrstuvwxyz Abcdefghijklmnopqrstuvwxyz";
    hl_vocab *words = hl_vocab_learn((const unsigned char *)text, strlen(text), 258, &err);
    ck_assert_int_eq(hl_vocab_size(words), 258);
    ck_assert_str_eq(hl_token_label(256, words, b), "_Abcdefghijklmn");
    ck_assert_str_eq(hl_token_label(257, words, b), "_the");
    hl_vocab_free(words);
    /* A label is cut before the first character that does not fit whole. */
    const unsigned char *utf8[] = {(const unsigned char *)"abcdefghijkl\xc3\xa9z"};
    words = hl_vocab_from_pieces(utf8, (size_t[]){15}, 1, &err);
    ck_assert_str_eq(hl_token_label(256, words, b), "abcdefghijkl");
    hl_vocab_free(words);
    hl_vocab_free(bytes);
}
END_TEST

/* The same attention drawn with two inputs' tokens: the pictures differ (the
 * labels) and the same tokens give the same bytes. */
START_TEST(test_maps_label_axes_with_tokens)
{
    hl_gpt *m = hm_previous_token_model(1, 1);
    const int32_t a[6] = {0, 1, 2, 3, 4, 5}, b[6] = {7, 7, 7, 7, 7, 7};
    hl_error err = {0};
    hl_tensor *maps = hl_heads_attention(m, a, 6, &err);
    ck_assert_msg(maps, "%s", err.message);
    ck_assert_int_eq(maps->shape[0], 1);
    for (int t = 1; t < 6; t++)
        ck_assert(maps->data[t * 6 + t - 1] > 0.99);
    char d1[64], d2[64], d3[64], p1[128], p2[128], p3[128];
    ck_assert_int_eq(hl_maps_write(fresh_dir(d1), m, maps, a, NULL, NULL, NULL, &err), HL_OK);
    ck_assert_int_eq(hl_maps_write(fresh_dir(d2), m, maps, b, NULL, NULL, NULL, &err), HL_OK);
    ck_assert_int_eq(hl_maps_write(fresh_dir(d3), m, maps, a, NULL, NULL, NULL, &err), HL_OK);
    snprintf(p1, sizeof p1, "%s/attn_L0H0.png", d1);
    snprintf(p2, sizeof p2, "%s/attn_L0H0.png", d2);
    snprintf(p3, sizeof p3, "%s/attn_L0H0.png", d3);
    int w1, h1, w2, h2, w3, h3;
    uint8_t *i1 = read_png(p1, &w1, &h1), *i2 = read_png(p2, &w2, &h2), *i3 = read_png(p3, &w3, &h3);
    ck_assert(w1 == w2 && h1 == h2 && w1 == w3 && h1 == h3);
    ck_assert_msg(memcmp(i1, i2, (size_t)w1 * h1 * 3) != 0, "token labels are not drawn");
    ck_assert(memcmp(i1, i3, (size_t)w1 * h1 * 3) == 0);
    /* Bad input: no such token, a wrong map shape. */
    const int32_t bad[2] = {0, 99};
    ck_assert_ptr_null(hl_heads_attention(m, bad, 2, &err));
    ck_assert_ptr_nonnull(strstr(err.message, "token 99"));
    hl_error_clear(&err);
    hl_tensor *wrong = hl_tensor_new("w", 3, (int[]){2, 6, 6}, false);
    ck_assert_int_eq(hl_maps_write(d1, m, wrong, a, NULL, NULL, NULL, &err), HL_ERR_SHAPE);
    free(i1), free(i2), free(i3);
    hl_tensor_free(wrong);
    hl_tensor_free(maps);
    remove_dir(d1), remove_dir(d2), remove_dir(d3);
    hl_gpt_free(m);
}
END_TEST

/* A long input (a GPT-2 context is 1,024 tokens) keeps its pictures small:
 * one head's map at a pixel or more a cell, at most about 1,024 pixels a
 * side, and the grid max-pooled, so the previous-token line stays at the top
 * colour in every pooled cell it crosses (mean pooling would dim it). */
START_TEST(test_maps_long_input_stay_small)
{
    hl_gpt *m = hm_previous_token_model(1, 1);
    enum { T = 600, POOLED = 200 }; /* blocks of 3x3 */
    int32_t tokens[T];
    hl_tensor *maps = hl_tensor_new("maps", 3, (int[]){1, T, T}, false);
    ck_assert_ptr_nonnull(maps);
    memset(maps->data, 0, sizeof(hl_real) * T * T);
    for (int t = 0; t < T; t++) {
        tokens[t] = t % HM_VOCAB;
        maps->data[(size_t)t * T + (t > 0 ? t - 1 : 0)] = 1;
    }
    char dir[64], path[128];
    hl_error err = {0};
    ck_assert_int_eq(hl_maps_write(fresh_dir(dir), m, maps, tokens, NULL, NULL, NULL, &err),
                     HL_OK);
    int w, h;
    snprintf(path, sizeof path, "%s/attn_L0H0.png", dir);
    uint8_t *one = read_png(path, &w, &h);
    ck_assert_msg(w >= T && h >= T && w <= 1400 && h <= 1400, "one head: %dx%d", w, h);
    snprintf(path, sizeof path, "%s/maps_grid.png", dir);
    uint8_t *grid = read_png(path, &w, &h), top[3];
    ck_assert_msg(w >= POOLED && h >= POOLED && w <= 1400 && h < 2 * POOLED,
                  "grid: %dx%d", w, h);
    hl_viridis_color(255, top);
    int lit = 0;
    for (size_t i = 0; i < (size_t)w * h; i++)
        lit += !memcmp(grid + 3 * i, top, 3);
    ck_assert_msg(lit >= POOLED, "%d pixels at the top colour", lit);
    free(one), free(grid);
    hl_tensor_free(maps);
    hl_gpt_free(m);
    remove_dir(dir);
}
END_TEST

/* In a random two-layer model every layer-0 head feeds layer 1's attention,
 * so ablating it must move layer 1's scores: each row's `after` is checked
 * against the scores of a copy of the model whose W_O columns for that head
 * are zero (the same ablation, made by hand), and must differ from `before`. */
START_TEST(test_ablation_effects_rows)
{
    enum { H = 2 };
    hl_gpt *m = hm_random_model(2, H, 16, 5);
    hl_probe p;
    hl_error err = {0};
    ck_assert_int_eq(hl_probe_new(m, &(hl_probe_opts){.bos = -1}, &p, &err), HL_OK);
    hl_head_scores s[2 * H];
    ck_assert_int_eq(hl_heads_detect(m, p.set, NULL, s, &err), HL_OK);
    hl_ablation_effect *rows;
    int n;
    ck_assert_int_eq(hl_heads_ablation_sequences(m, p.set), p.set->n);
    ck_assert_int_eq(hl_heads_ablation_effects(m, p.set, p.set->n, s, &rows, &n, &err), HL_OK);
    ck_assert_int_eq(n, H * H);
    for (int r = 0; r < n; r++) {
        const hl_ablation_effect *e = &rows[r];
        ck_assert(e->src_layer == 0 && e->dst_layer == 1);
        ck_assert_double_eq_tol(e->before, s[H + e->dst_head].v[e->detector], 1e-12);
        /* The same ablation by hand: head src's columns of layer 0's W_O zeroed. */
        hl_gpt *cut = hm_random_model(2, H, 16, 5);
        hl_tensor *wo = cut->blocks[0].attn.out_proj_weight;
        const int E = wo->shape[0], HD = wo->shape[1], D = HD / H;
        for (int i = 0; i < E; i++)
            for (int d = 0; d < D; d++)
                wo->data[(size_t)i * HD + e->src_head * D + d] = 0;
        hl_head_scores by_hand[2 * H];
        ck_assert_int_eq(hl_heads_detect(cut, p.set, NULL, by_hand, &err), HL_OK);
        ck_assert_double_eq_tol(e->after, by_hand[H + e->dst_head].v[e->detector], 1e-6);
        ck_assert_msg(fabs(e->after - e->before) > 1e-4,
                      "ablating L0H%d left L1H%d's score at %g", e->src_head, e->dst_head,
                      e->before);
        hl_gpt_free(cut);
    }
    free(rows);
    hl_probe_free(&p);
    hl_gpt_free(m);
}
END_TEST

/* Three layers over the first 3 sequences: each row's before and after are
 * the detectors of full forward passes on those sequences alone, with no head
 * and with its source head gated off (hl_heads_run_ablate), though the sweep
 * reruns only the layers from the source's on. Bad sequence counts fail. */
START_TEST(test_ablation_effects_match_full_passes)
{
    enum { L = 3, H = 2 };
    hl_gpt *m = hm_random_model(L, H, 16, 8);
    hl_probe p;
    hl_error err = {0};
    ck_assert_int_eq(hl_probe_new(m, &(hl_probe_opts){.bos = -1}, &p, &err), HL_OK);
    hl_head_scores s[L * H], clean[L * H], cut[L * H];
    ck_assert_int_eq(hl_heads_detect(m, p.set, NULL, s, &err), HL_OK);
    hl_eval_set part = *p.set;
    part.n = 3;
    ck_assert_int_eq(hl_heads_detect(m, &part, NULL, clean, &err), HL_OK);
    hl_ablation_effect *rows;
    int n;
    ck_assert_int_eq(hl_heads_ablation_effects(m, p.set, 3, s, &rows, &n, &err), HL_OK);
    ck_assert_int_eq(n, H * H + H * 2 * H);
    for (int r = 0; r < n; r++) {
        const hl_ablation_effect *e = &rows[r];
        ck_assert(e->src_layer < e->dst_layer);
        const int d = e->dst_layer * H + e->dst_head;
        ck_assert_int_eq(e->detector, hl_head_main_detector(&s[d]));
        ck_assert_double_eq_tol(e->before, clean[d].v[e->detector], 1e-12);
        hl_head_set off = {0};
        off.on[e->src_layer][e->src_head] = true;
        hl_heads_run run;
        ck_assert_int_eq(hl_heads_run_ablate(&run, m, part.T, &off, NULL, &err), HL_OK);
        ck_assert_int_eq(hl_heads_detect(m, &part, &run.run, cut, &err), HL_OK);
        hl_heads_run_free(&run);
        ck_assert_double_eq_tol(e->after, cut[d].v[e->detector], 1e-12);
    }
    free(rows);
    ck_assert_int_eq(hl_heads_ablation_effects(m, p.set, 0, s, &rows, &n, &err), HL_ERR_ARG);
    ck_assert_int_eq(hl_heads_ablation_effects(m, p.set, p.set->n + 1, s, &rows, &n, &err),
                     HL_ERR_ARG);
    ck_assert_ptr_null(rows);
    hl_probe_free(&p);
    hl_gpt_free(m);
}
END_TEST

START_TEST(test_diagram_draws_edges_and_refuses_bad_ones)
{
    hl_diagram_node nodes[] = {{0, "a"}, {1, "b"}};
    hl_diagram_edge edges[] = {{.from = 0, .to = 1, .weight = 1, .color = 1}};
    hl_diagram d = {"t", nodes, 2, edges, 1, NULL, 0};
    hl_diagram_layout lay;
    hl_error err = {0};
    ck_assert_int_eq(hl_diagram_measure(&d, &lay, &err), HL_OK);
    ck_assert(lay.y[0] > lay.y[1]); /* row 0 at the bottom */
    char dir[64], path[128];
    snprintf(path, sizeof path, "%s/d.png", fresh_dir(dir));
    ck_assert_int_eq(hl_diagram_write(&d, path, &err), HL_OK);
    int w, h;
    uint8_t *rgb = read_png(path, &w, &h), want[3];
    hl_plot_color(1, want);
    /* Colour 1 runs in the middle lane, halfway between the nodes. */
    const int x = (lay.x[0] + lay.x[1]) / 2, y = (lay.y[0] + lay.y[1]) / 2;
    ck_assert_mem_eq(rgb + ((size_t)y * w + x) * 3, want, 3);
    free(rgb);
    hl_diagram_layout_free(&lay);
    edges[0].to = 5;
    ck_assert_int_eq(hl_diagram_write(&d, path, &err), HL_ERR_ARG);
    remove_dir(dir);
}
END_TEST

static const char *const sections[] = {"config", "roles", "maps", "detectors", "ablation",
                                       "importance", "composition", "circuit", "patching",
                                       "curve"};

/* A report of the hand-built two-layer model into a fresh directory. */
static void write_report(char dir[64])
{
    hl_gpt *m = hm_previous_token_model(2, 1);
    const int32_t x[8] = {1, 2, 3, 4, 1, 2, 3, 4};
    hl_gpt_meta meta = {.task = "test", .step = 7};
    hl_head_report_opts o = {.model_path = "forced <model>", .meta = &meta,
                             .probe = {.bos = -1, .seed = 2}, .map_tokens = x, .map_T = 8};
    hl_error err = {0};
    ck_assert_msg(hl_head_report_write(m, &o, fresh_dir(dir), &err) == HL_OK, "%s", err.message);
    hl_gpt_free(m);
}

START_TEST(test_report_holds_every_section)
{
    char dir[64], path[128];
    write_report(dir);
    snprintf(path, sizeof path, "%s/report.html", dir);
    size_t n;
    char *html = (char *)slurp(path, &n);
    html = realloc(html, n + 1);
    html[n] = '\0';
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++) {
        char id[64];
        snprintf(id, sizeof id, "<section id=\"%s\">", sections[i]);
        ck_assert_msg(strstr(html, id), "no section %s", sections[i]);
    }
    int images = 0;
    for (const char *p = html; (p = strstr(p, "src=\"data:image/png;base64,iVBORw0KGgo")); p++)
        images++;
    ck_assert_int_eq(images, 6); /* maps, detectors, q, k, v, circuit */
    ck_assert_ptr_null(strstr(html, "http://"));
    ck_assert_ptr_null(strstr(html, "https://"));
    ck_assert_ptr_nonnull(strstr(html, "forced &lt;model&gt;"));
    ck_assert_ptr_nonnull(strstr(html, "previous-token+copying"));
    /* The patching section's per-head table and its routes through K. */
    ck_assert_ptr_nonnull(strstr(html, "<th>patch z</th>"));
    ck_assert_ptr_nonnull(strstr(html, "<th>path patching (k)</th>"));
    const char *files[] = {"scores.csv", "scores.png", "maps_grid.png", "attn_L1H0.png",
                           "composition.csv", "composition_k.png", "circuit.png",
                           "ablation_effects.csv", "importance.csv"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        ck_assert_msg(access(path, R_OK) == 0, "no %s", files[i]);
    }
    /* importance.csv: heads importance's columns, a row a head, ranks 1..rows */
    snprintf(path, sizeof path, "%s/importance.csv", dir);
    FILE *f = fopen(path, "r");
    char line[256];
    ck_assert(f && fgets(line, sizeof line, f));
    ck_assert_str_eq(line, "layer,head,importance,raw,rank\n");
    int rows = 0, layer, head, rank;
    double importance, raw, by_rank[64];
    for (int i = 0; i < 64; i++)
        by_rank[i] = NAN;
    while (fgets(line, sizeof line, f)) {
        ck_assert_int_eq(sscanf(line, "%d,%d,%lf,%lf,%d", &layer, &head, &importance, &raw,
                                &rank), 5);
        ck_assert(rank >= 1 && rank <= 64 && isnan(by_rank[rank - 1])); /* each rank once */
        by_rank[rank - 1] = importance;
        rows++;
    }
    fclose(f);
    ck_assert_int_ge(rows, 2);
    for (int i = 0; i < rows; i++) /* ranks 1..rows, the most important first */
        ck_assert_msg(!isnan(by_rank[i]) && (i == 0 || by_rank[i] <= by_rank[i - 1]),
                      "rank %d: importance %g after %g", i + 1, by_rank[i], i ? by_rank[i - 1] : 0);
    free(html);
    remove_dir(dir);
}
END_TEST

/* Headless Chromium (tools/deps.sh chromium) loads the page; the page's own
 * script reports how many pictures decoded, and the screenshot is not blank. */
START_TEST(test_report_opens_in_chromium)
{
    char out[8192];
    ck_assert_msg(tu_run("command -v chromium", out, sizeof out) == 0,
                  "chromium is missing: run tools/deps.sh chromium (make test does)");
    char dir[64], cmd[1024];
    write_report(dir);
    const char *flags = "--headless --no-sandbox --disable-gpu --disable-background-networking "
                        "--disable-component-update --disable-sync --no-first-run "
                        "--virtual-time-budget=5000";
    /* The DOM after the page's script ran: its summary and each picture's width. */
    snprintf(cmd, sizeof cmd, "(chromium %s --user-data-dir=%s/profile --dump-dom "
             "file://%s/report.html 2>/dev/null) | grep -o -e 'images decoded: [0-9]* of [0-9]*' "
             "-e 'data-natural-width=\"[0-9]*\"'", flags, dir, dir);
    ck_assert_msg(tu_run(cmd, out, sizeof out) == 0, "no summary in the DOM: %s", out);
    ck_assert_msg(strstr(out, "images decoded: 6 of 6"), "page says: %s", out);
    ck_assert_msg(!strstr(out, "data-natural-width=\"0\""), "a picture did not decode: %s", out);
    int widths = 0;
    for (const char *p = out; (p = strstr(p, "data-natural-width")); p++)
        widths++;
    ck_assert_int_eq(widths, 6);
    snprintf(cmd, sizeof cmd, "chromium %s --user-data-dir=%s/profile --window-size=1000,1400 "
             "--screenshot=%s/shot.png file://%s/report.html >/dev/null 2>&1", flags, dir, dir,
             dir);
    ck_assert_int_eq(tu_run(cmd, out, sizeof out), 0);
    char path[128];
    snprintf(path, sizeof path, "%s/shot.png", dir);
    int w, h;
    uint8_t *rgb = read_png(path, &w, &h);
    size_t differ = 0;
    for (size_t i = 0; i < (size_t)w * h; i++)
        differ += memcmp(rgb + i * 3, rgb, 3) != 0;
    ck_assert_msg(differ > (size_t)w * h / 50, "the screenshot is blank (%zu of %d pixels drawn)",
                  differ, w * h);
    free(rgb);
    remove_dir(dir);
}
END_TEST

/* ---- the heads program -------------------------------------------------------- */

/* Files in dir: the forced 2-layer model (forced.safetensors), a 1-layer one
 * (one.safetensors), a random byte-level model (bytes.safetensors) and a
 * text (text.txt). */
static void program_inputs(char dir[64])
{
    fresh_dir(dir);
    char path[128];
    hl_error err = {0};
    hl_gpt_meta meta = {.task = "test"};
    hl_gpt *m = hm_previous_token_model(2, 1);
    snprintf(path, sizeof path, "%s/forced.safetensors", dir);
    ck_assert_int_eq(hl_gpt_save_meta(path, m, &meta, &err), HL_OK);
    hl_gpt_free(m);
    m = hm_previous_token_model(1, 1);
    snprintf(path, sizeof path, "%s/one.safetensors", dir);
    ck_assert_int_eq(hl_gpt_save_meta(path, m, &meta, &err), HL_OK);
    hl_gpt_free(m);
    hl_gpt_config cfg = {.vocab_in = 256, .vocab_out = 256, .n_ctx = 16, .d_model = 16,
                         .n_heads = 2, .n_layers = 2, .norm = HL_GPT_NORM_LAYER, .emb_std = 0.5};
    m = hl_gpt_new(&cfg, &err);
    hl_rng rng;
    hl_rng_seed(&rng, 9);
    hl_gpt_init_weights(m, &rng);
    snprintf(meta.task, sizeof meta.task, "charlm");
    snprintf(path, sizeof path, "%s/bytes.safetensors", dir);
    ck_assert_int_eq(hl_gpt_save_meta(path, m, &meta, &err), HL_OK);
    hl_gpt_free(m);
    snprintf(path, sizeof path, "%s/text.txt", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("the cat sat on the mat; the cat sat on the mat again.\n", f);
    fclose(f);
}

/* Runs `heads ARGS` (%s = dir) and returns its status; output in out. */
static int heads(const char *dir, char *out, size_t size, const char *args)
{
    char line[1024], cmd[2048];
    snprintf(line, sizeof line, args, dir, dir, dir);
    snprintf(cmd, sizeof cmd, HL_BUILD_DIR "/heads %s", line);
    return tu_run(cmd, out, size);
}

START_TEST(test_program_commands_write_their_files)
{
    char dir[64], out[16384], path[160];
    program_inputs(dir);
    ck_assert_msg(heads(dir, out, sizeof out, "scores --model %s/forced.safetensors --out %s/s") == 0,
                  "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "previous-token"));
    snprintf(path, sizeof path, "%s/s/scores.csv", dir);
    size_t n;
    char *csv = (char *)slurp(path, &n);
    const char header[] = "layer,head,previous_token,duplicate_token,induction,copying,"
                          "first_token,local,self,entropy,two_back,previous_token_tl,"
                          "duplicate_token_tl,induction_tl\n";
    ck_assert_msg(n > sizeof header && !memcmp(csv, header, sizeof header - 1), "%.*s", (int)n, csv);
    free(csv);
    ck_assert_msg(heads(dir, out, sizeof out, "scores --model %s/bytes.safetensors --data "
                        "%s/text.txt --out %s/b") == 0, "%s", out);
    ck_assert_msg(heads(dir, out, sizeof out, "maps --model %s/bytes.safetensors --text 'a b\n"
                        "a b' --heads 1.1 --out %s/m") == 0, "%s", out);
    snprintf(path, sizeof path, "%s/m/attn_L1H1.png", dir);
    ck_assert(access(path, R_OK) == 0);
    snprintf(path, sizeof path, "%s/m/attn_L0H0.png", dir);
    ck_assert(access(path, R_OK) != 0);
    snprintf(path, sizeof path, "%s/m/maps.csv", dir);
    csv = (char *)slurp(path, &n);
    ck_assert_ptr_nonnull(strstr(csv, "L1H1,1,\"' '\","));
    ck_assert_ptr_nonnull(strstr(csv, "L1H1,3,\"\\n\","));
    free(csv);
    /* A quote in a label is doubled, the rest of the label kept: BPE learns
     * " followed by a space as one token, "_\"" (written "_"" before). */
    char command[1024];
    snprintf(command, sizeof command,
             "for i in $(seq 400); do printf 'He said \"ab\" and \"ab.\"\\n'; done > %s/q.txt "
             "&& " HL_BUILD_DIR "/charlm --data %s/q.txt --vocab 300 --tokenizer bpe --steps 1 "
             "--ctx 16 --d-model 16 --heads 2 --layers 1 --batch 2 --eval-every 1 --sample 0 "
             "--no-report --out %s/bpe", dir, dir, dir);
    tu_run_ok(command);
    ck_assert_msg(heads(dir, out, sizeof out, "maps --model %s/bpe/model.safetensors --text "
                        "'x\"ab. \"ab' --out %s/q") == 0, "%s", out);
    snprintf(path, sizeof path, "%s/q/maps.csv", dir);
    csv = (char *)slurp(path, &n);
    ck_assert_msg(strstr(csv, "L0H0,1,\"\"\"\",") && strstr(csv, "L0H0,4,\"_\"\"\","), "%s", csv);
    free(csv);
    ck_assert_msg(heads(dir, out, sizeof out, "circuits --model %s/forced.safetensors --out "
                        "%s/c") == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "random baseline"));
    snprintf(path, sizeof path, "%s/c/composition.csv", dir);
    csv = (char *)slurp(path, &n);
    ck_assert(!strncmp(csv, "kind,src,dst,score\nq,L0H0,L1H0,", 31));
    free(csv);
    snprintf(path, sizeof path, "%s/c/ablation_effects.csv", dir);
    csv = (char *)slurp(path, &n);
    ck_assert(!strncmp(csv, "src,dst,detector,before,after\nL0H0,L1H0,previous_token,", 55));
    free(csv);
    ck_assert_msg(heads(dir, out, sizeof out, "report --model %s/bytes.safetensors --data "
                        "%s/text.txt --out %s/r") == 0, "%s", out);
    snprintf(path, sizeof path, "%s/r/report.html", dir);
    ck_assert(access(path, R_OK) == 0);
    remove_dir(dir);
}
END_TEST

/* Bad input for every command: status 2, a message, and no output folder. */
START_TEST(test_program_bad_input)
{
    static const struct {
        const char *args, *message;
    } cases[] = {
        {"scores --model %s/missing.safetensors --out %s/x", "missing.safetensors"},
        {"scores --model %s/text.txt --out %s/x", "text.txt"},
        {"scores --model %s/forced.safetensors --data %s/text.txt --out %s/x", "not a text model"},
        {"scores --model %s/forced.safetensors --heads 0.0 --out %s/x", "--heads"},
        {"maps --model %s/bytes.safetensors --text '' --out %s/x", "empty"},
        {"maps --model %s/bytes.safetensors --text ab --heads 2.0 --out %s/x", "head L2H0 is out of range"},
        {"maps --model %s/bytes.safetensors --text ab --heads L0H2 --out %s/x", "head L0H2 is out of range"},
        {"maps --model %s/bytes.safetensors --text ab --heads L0 --out %s/x", "LlayerHhead"},
        {"maps --model %s/bytes.safetensors --text ab --heads 0.1, --out %s/x", "LlayerHhead"},
        {"maps --model %s/bytes.safetensors --text ab --heads 0.-1 --out %s/x", "LlayerHhead"},
        {"maps --model %s/bytes.safetensors --data %s/text.txt --offset 999 --out %s/x",
         "past the end"},
        {"maps --model %s/bytes.safetensors --data %s/nothing.txt --out %s/x", "nothing.txt"},
        {"maps --model %s/bytes.safetensors --out %s/x", "--text STR or --data"},
        {"maps --model %s/forced.safetensors --text 'a b' --out %s/x", "token numbers"},
        {"circuits --model %s/one.safetensors --out %s/x", "one layer"},
        {"circuits --model %s/missing.safetensors --out %s/x", "missing.safetensors"},
        {"report --model %s/missing.safetensors --out %s/x", "missing.safetensors"},
        {"report --model %s/bytes.safetensors --curve --out %s/x", "--data"},
        {"report --model %s/bytes.safetensors --text '' --out %s/x", "empty"},
        {"report --model %s/bytes.safetensors --data %s/text.txt --offset 999 --out %s/x",
         "past the end"},
    };
    char dir[64], out[8192], path[128];
    program_inputs(dir);
    snprintf(path, sizeof path, "%s/x", dir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int status = heads(dir, out, sizeof out, cases[i].args);
        ck_assert_msg(status == 2, "%s: status %d: %s", cases[i].args, status, out);
        ck_assert_msg(strstr(out, cases[i].message), "%s: \"%s\" lacks \"%s\"", cases[i].args,
                      out, cases[i].message);
        ck_assert_msg(access(path, F_OK) != 0, "%s wrote %s", cases[i].args, path);
    }
    remove_dir(dir);
}
END_TEST

Suite *head_report_suite(void)
{
    Suite *s = suite_create("head_report");
    TCase *tc = tcase_create("head_report");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_token_labels);
    tcase_add_test(tc, test_maps_label_axes_with_tokens);
    tcase_add_test(tc, test_maps_long_input_stay_small);
    tcase_add_test(tc, test_ablation_effects_rows);
    tcase_add_test(tc, test_ablation_effects_match_full_passes);
    tcase_add_test(tc, test_diagram_draws_edges_and_refuses_bad_ones);
    tcase_add_test(tc, test_report_holds_every_section);
    tcase_add_test(tc, test_report_opens_in_chromium);
    tcase_add_test(tc, test_program_commands_write_their_files);
    tcase_add_test(tc, test_program_bad_input);
    suite_add_tcase(s, tc);
    return s;
}
