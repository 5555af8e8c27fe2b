/* Loading a Hugging Face model folder: see hf.h. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files/fs.h"
#include "io/hf.h"
#include "io/hf_names.h"
#include "io/internal.h"
#include "io/safetensors.h"
#include "text/json.h"

#define HF_MAX_SHARDS 256
#define HF_PATH_MAX 4096

/* The folder's weights: one file, or the shards an index names. */
typedef struct {
    const char *dir;
    int n_files;
    char *names[HF_MAX_SHARDS];   /* file names inside dir */
    hl_safetensors *files[HF_MAX_SHARDS];
    bool *used[HF_MAX_SHARDS];    /* per entry of each file: taken by a parameter */
} hf_weights;

static void weights_free(hf_weights *w)
{
    for (int i = 0; i < w->n_files; i++) {
        free(w->names[i]);
        hl_safetensors_free(w->files[i]);
        free(w->used[i]);
    }
}

static hl_status open_file(hf_weights *w, const char *name, hl_error *err)
{
    char path[HF_PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", w->dir, name) >= (int)sizeof path)
        return hl_error_set(err, HL_ERR_ARG, "%s: path too long", w->dir);
    const int i = w->n_files;
    if (!(w->names[i] = strdup(name)))
        return hl_error_set(err, HL_ERR_NOMEM, "out of memory");
    w->n_files++;
    if (hl_safetensors_read(path, &w->files[i], err) != HL_OK)
        return err->status;
    const size_t n = hl_safetensors_count(w->files[i]);
    if (!(w->used[i] = calloc(n ? n : 1, sizeof *w->used[i])))
        return hl_error_set(err, HL_ERR_NOMEM, "out of memory");
    return HL_OK;
}

static int file_index(const hf_weights *w, const char *name)
{
    for (int i = 0; i < w->n_files; i++)
        if (!strcmp(w->names[i], name))
            return i;
    return -1;
}

/* The shards of model.safetensors.index.json: every file its weight_map
 * names, each opened once; every tensor it maps must be in its file. */
static hl_status open_shards(hf_weights *w, const char *index_path, hl_error *err)
{
    size_t len;
    char *text = (char *)hl_fs_read_file(index_path, &len);
    if (!text)
        return hl_error_set(err, HL_ERR_IO, "%s: cannot read", index_path);
    char why[HL_JSON_WHY_MAX];
    cJSON *root;
    const hl_status parsed = hl_json_parse(text, len, &root, why);
    free(text);
    if (parsed == HL_ERR_NOMEM)
        return hl_error_set(err, parsed, "%s: %s", index_path, why);
    if (parsed != HL_OK)
        return hl_error_set(err, parsed, "%s: not valid JSON (%s)", index_path, why);
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    hl_status st = HL_OK;
    if (!cJSON_IsObject(map) || !cJSON_GetArraySize(map))
        st = hl_error_set(err, HL_ERR_FORMAT, "%s: \"weight_map\" must be a non-empty object "
                          "of tensor names to file names", index_path);
    const cJSON *e;
    cJSON_ArrayForEach(e, map)
    {
        if (st != HL_OK)
            break;
        if (!cJSON_IsString(e) || !*e->valuestring || strchr(e->valuestring, '/')) {
            st = hl_error_set(err, HL_ERR_FORMAT, "%s: weight_map[\"%.100s\"] must name a file "
                              "of the folder", index_path, e->string);
            break;
        }
        int i = file_index(w, e->valuestring);
        if (i < 0 && w->n_files == HF_MAX_SHARDS)
            st = hl_error_set(err, HL_ERR_FORMAT, "%s: more than %d shards", index_path,
                              HF_MAX_SHARDS);
        else if (i < 0 && (st = open_file(w, e->valuestring, err)) == HL_OK)
            i = w->n_files - 1;
        if (st == HL_OK && !hl_safetensors_find(w->files[i], e->string))
            st = hl_error_set(err, HL_ERR_FORMAT, "%s: tensor \"%.100s\" is mapped to %s, which "
                              "does not hold it", index_path, e->string, e->valuestring);
    }
    cJSON_Delete(root);
    return st;
}

/* model.safetensors, else the shards its index names: transformers looks
 * in that order too. */
static hl_status open_weights(hf_weights *w, hl_error *err)
{
    char path[HF_PATH_MAX];
    snprintf(path, sizeof path, "%s/model.safetensors", w->dir);
    FILE *single = fopen(path, "rb");
    if (single) {
        fclose(single);
        return open_file(w, "model.safetensors", err);
    }
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", w->dir);
    FILE *index = fopen(path, "rb");
    if (!index)
        return hl_error_set(err, HL_ERR_IO, "%s: no model.safetensors or "
                            "model.safetensors.index.json (pytorch_model.bin is not read: "
                            "save with safe_serialization=True)", w->dir);
    fclose(index);
    return open_shards(w, path, err);
}

/* The entry of a tensor name, marked used; NULL when no file holds it. */
static const hl_safetensors_entry_info *take(hf_weights *w, const char *name, int *file)
{
    for (int i = 0; i < w->n_files; i++)
        for (size_t k = 0; k < hl_safetensors_count(w->files[i]); k++) {
            const hl_safetensors_entry_info *e = hl_safetensors_entry(w->files[i], k);
            if (!strcmp(e->name, name)) {
                w->used[i][k] = true;
                *file = i;
                return e;
            }
        }
    return NULL;
}

/* Only floating-point tensors are weights: an integer or boolean tensor
 * would load as numbers that were never weights. Their values must be
 * finite. */
static hl_status check_weight(const hf_weights *w, int f, const hl_safetensors_entry_info *e,
                              hl_error *err)
{
    char file[HF_PATH_MAX];
    snprintf(file, sizeof file, "%s/%s", w->dir, w->names[f]);
    if (!hl_dtype_is_float(e->dtype))
        return hl_error_set(err, HL_ERR_FORMAT, "%s: tensor \"%s\" is %s; weights are read "
                            "from F32, F16, BF16 or F64", file, e->name,
                            hl_dtype_name(e->dtype));
    return hl_io_check_values(e, file, HL_IO_FINITE, err);
}

/* The checkpoint's tensor for part i of src, of the shape the config asks
 * for (rows of the parameter's part, then cols; a Conv1D's weight stored
 * (cols,rows)), its values appended at *at. */
static hl_status read_part(hf_weights *w, const hl_hf_source *src, int i, int rank, int cols,
                           hl_real **at, hl_error *err)
{
    int f;
    const hl_safetensors_entry_info *e = take(w, src->name[i], &f);
    if (!e)
        return hl_error_set(err, HL_ERR_FORMAT, "%s: tensor \"%s\" is missing", w->dir,
                            src->name[i]);
    const bool transposed = src->layout == HL_HF_TRANSPOSED && rank == 2;
    const int64_t want[2] = {transposed ? cols : src->rows[i], transposed ? src->rows[i] : cols};
    bool same = e->rank == rank;
    for (int d = 0; same && d < rank; d++)
        same = e->shape[d] == want[d];
    if (!same) {
        char got[HL_ST_SHAPE_STR_MAX], expected[64];
        if (rank == 2)
            snprintf(expected, sizeof expected, "(%lld,%lld)", (long long)want[0],
                     (long long)want[1]);
        else
            snprintf(expected, sizeof expected, "(%lld)", (long long)want[0]);
        return hl_error_set(err, HL_ERR_FORMAT, "%s/%s: tensor \"%s\" has shape %s; the config "
                            "asks for %s", w->dir, w->names[f], src->name[i],
                            hl_safetensors_shape_str(e, got), expected);
    }
    if (check_weight(w, f, e, err) != HL_OK)
        return err->status;
    hl_tensor *t = hl_safetensors_load(w->files[f], src->name[i], false, err);
    if (!t)
        return err->status;
    memcpy(*at, t->data, t->numel * sizeof **at);
    *at += t->numel;
    hl_tensor_free(t);
    return HL_OK;
}

/* One parameter from its source, converted into its layout. */
static hl_status load_param(hf_weights *w, const hl_gpt *m, const hl_hf_source *src,
                            hl_tensor *param, hl_error *err)
{
    const int rows = param->shape[0], cols = param->rank == 2 ? param->shape[1] : 1;
    hl_real *theirs = malloc(param->numel * sizeof *theirs), *at = theirs;
    if (!theirs)
        return hl_error_set(err, HL_ERR_NOMEM, "out of memory");
    hl_status st = HL_OK;
    for (int i = 0; i < src->n_parts && st == HL_OK; i++)
        st = read_part(w, src, i, param->rank, cols, &at, err);
    if (st == HL_OK)
        hl_hf_to_ours(src, theirs, param->data, rows, cols, m->cfg.n_heads,
                      m->cfg.d_model / m->cfg.n_heads);
    free(theirs);
    return st;
}

/* A tied head may also be stored (GPT-2's lm_head.weight): it must then be
 * the embedding itself. */
static hl_status check_tied_copy(hf_weights *w, const hl_gpt *m, const char *name,
                                 hl_error *err)
{
    int f;
    const hl_safetensors_entry_info *e = take(w, name, &f);
    if (!e)
        return HL_OK;
    if (check_weight(w, f, e, err) != HL_OK)
        return err->status;
    hl_tensor *t = hl_safetensors_load(w->files[f], name, false, err);
    if (!t)
        return err->status;
    const bool same = t->numel == m->tok_emb->numel &&
                      !memcmp(t->data, m->tok_emb->data, t->numel * sizeof *t->data);
    hl_tensor_free(t);
    return same ? HL_OK
                : hl_error_set(err, HL_ERR_FORMAT, "%s: \"tie_word_embeddings\" is true but "
                               "tensor \"%s\" differs from the token embedding", w->dir, name);
}

/* Every tensor of the files was taken, or is a buffer. */
static hl_status check_all_used(const hf_weights *w, hl_error *err)
{
    for (int i = 0; i < w->n_files; i++)
        for (size_t k = 0; k < hl_safetensors_count(w->files[i]); k++) {
            const hl_safetensors_entry_info *e = hl_safetensors_entry(w->files[i], k);
            if (!w->used[i][k] && !hl_hf_is_buffer(e->name))
                return hl_error_set(err, HL_ERR_FORMAT, "%s/%s: tensor \"%s\" has no place in "
                                    "the model config.json describes", w->dir, w->names[i],
                                    e->name);
        }
    return HL_OK;
}

/* GPT-2 checkpoints name tensors with "transformer." (as the class saves
 * them) or without (the original uploads). */
static const char *gpt2_prefix(hf_weights *w)
{
    for (int i = 0; i < w->n_files; i++)
        if (hl_safetensors_find(w->files[i], "transformer.wte.weight"))
            return "transformer.";
    return "";
}

static hl_status load_params(hf_weights *w, hl_hf_arch arch, hl_gpt *m, hl_error *err)
{
    const char *prefix = arch == HL_HF_GPT2 ? gpt2_prefix(w) : "";
    for (size_t i = 0; i < hl_params_n_tensors(m->params); i++) {
        hl_tensor *param = hl_params_tensor(m->params, i);
        hl_hf_source src;
        if (!hl_hf_source_of(arch, prefix, m, param, &src))
            return hl_error_set(err, HL_ERR_ARG, "%s: parameter %s has no place in %s", w->dir,
                                param->name, hl_hf_arch_name(arch));
        if (load_param(w, m, &src, param, err) != HL_OK)
            return err->status;
    }
    if (m->cfg.tie_embeddings) {
        const char *head = arch == HL_HF_GPT2 ? "lm_head.weight"
                           : arch == HL_HF_GPT_NEOX ? "embed_out.weight"
                                                    : "lm_head.weight";
        if (check_tied_copy(w, m, head, err) != HL_OK)
            return err->status;
    }
    return check_all_used(w, err);
}

hl_status hl_hf_read_config(const char *dir, hl_gpt_config *cfg, hl_hf_arch *arch, hl_error *err)
{
    char path[HF_PATH_MAX];
    if (snprintf(path, sizeof path, "%s/config.json", dir) >= (int)sizeof path)
        return hl_error_set(err, HL_ERR_ARG, "%s: path too long", dir);
    size_t len;
    char *text = (char *)hl_fs_read_file(path, &len);
    if (!text)
        return hl_error_set(err, HL_ERR_IO, "%s: cannot read", path);
    hl_status st = hl_hf_config_parse(text, len, path, cfg, arch, err);
    free(text);
    return st;
}

/* The values of the folder's tensors that are not buffers (each tensor's
 * bytes lie in its file, so the sum does not overflow). */
static uint64_t weight_values(const hf_weights *w)
{
    uint64_t n = 0;
    for (int i = 0; i < w->n_files; i++)
        for (size_t k = 0; k < hl_safetensors_count(w->files[i]); k++) {
            const hl_safetensors_entry_info *e = hl_safetensors_entry(w->files[i], k);
            if (!hl_hf_is_buffer(e->name))
                n += e->nbytes / hl_dtype_size(e->dtype);
        }
    return n;
}

/* The model of cfg with the folder's weights. Every parameter is read from
 * tensors of its own, so weights holding fewer values belong to another
 * model. One that asks for over twice the values the weights hold is refused
 * before it is built (a config of another size could ask for gigabytes); a
 * nearer miss is built, for load_params to name the tensor at fault. */
static hl_gpt *load_model(hf_weights *w, const hl_gpt_config *cfg, hl_hf_arch arch,
                          hl_error *err)
{
    if (open_weights(w, err) != HL_OK)
        return NULL;
    const uint64_t want = hl_gpt_count_parameters(cfg), have = weight_values(w);
    if (want > 2 * have) /* have counts bytes of files in memory: no overflow */
        return hl_error_set(err, HL_ERR_FORMAT, "%s: config.json asks for %" PRIu64 " parameter "
                            "values; the weights hold %" PRIu64, w->dir, want, have), NULL;
    hl_error local = {0};
    hl_gpt *m = hl_gpt_new(cfg, &local);
    if (!m)
        return hl_error_set(err, local.status, "%s/config.json: %s", w->dir, local.message), NULL;
    if (load_params(w, arch, m, err) != HL_OK) {
        hl_gpt_free(m);
        return NULL;
    }
    return m;
}

hl_gpt *hl_hf_load(const char *dir, hl_error *err)
{
    hl_gpt_config cfg;
    hl_hf_arch arch;
    if (!dir)
        return hl_error_set(err, HL_ERR_ARG, "hf: NULL folder"), NULL;
    if (hl_hf_read_config(dir, &cfg, &arch, err) != HL_OK)
        return NULL;
    hl_error local = {0};
    if (hl_gpt_config_check(&cfg, &local) != HL_OK)
        return hl_error_set(err, local.status, "%s/config.json: %s", dir, local.message), NULL;
    hf_weights w = {.dir = dir};
    hl_gpt *m = load_model(&w, &cfg, arch, err);
    weights_free(&w);
    return m;
}
