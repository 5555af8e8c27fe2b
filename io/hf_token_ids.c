/* The special token ids of a Hugging Face model's configs: see hf.h. */
#include "io/hf.h"
#include "io/internal.h"
#include "files/fs.h"
#include "text/json.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const keys[3] = {"bos_token_id", "eos_token_id", "pad_token_id"};

static bool is_id(const cJSON *v)
{
    return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) &&
           fabs(v->valuedouble) <= INT32_MAX;
}

/* One key's value into *out: null (none), an integer, or a list of them. */
static bool read_list(const cJSON *v, hl_hf_id_list *out)
{
    hl_hf_id_list l = {0};
    if (is_id(v)) {
        l.id[l.n++] = (int)v->valuedouble;
    } else if (cJSON_IsArray(v)) {
        const cJSON *x;
        cJSON_ArrayForEach(x, v) {
            if (!is_id(x) || l.n == HL_HF_IDS_MAX)
                return false;
            l.id[l.n++] = (int)x->valuedouble;
        }
    } else if (!cJSON_IsNull(v)) {
        return false;
    }
    *out = l;
    return true;
}

hl_status hl_hf_token_ids_parse(const char *json, size_t len, const char *what,
                                hl_hf_token_ids *ids, hl_error *err)
{
    char why[HL_JSON_WHY_MAX] = "no text";
    cJSON *root = NULL;
    const hl_status parsed = json ? hl_json_parse(json, len, &root, why) : HL_ERR_ARG;
    if (parsed == HL_ERR_NOMEM)
        return hl_error_set(err, parsed, "%s: %s", what, why);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return hl_error_set(err, HL_ERR_FORMAT, "%s: not a JSON object%s%s%s", what,
                            root ? "" : " (not valid JSON: ", root ? "" : why,
                            root ? "" : ")");
    }
    hl_hf_token_ids read = *ids;
    hl_hf_id_list *lists[3] = {&read.bos, &read.eos, &read.pad};
    hl_status st = HL_OK;
    for (int k = 0; k < 3 && st == HL_OK; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, keys[k]);
        if (v && !read_list(v, lists[k]))
            st = hl_error_set(err, HL_ERR_FORMAT, "%s: \"%s\" must be null, a token id or a "
                              "list of at most %d", what, keys[k], HL_HF_IDS_MAX);
    }
    cJSON_Delete(root);
    if (st == HL_OK)
        *ids = read;
    return st;
}

/* dir/name's ids over *ids; a missing file, when it may be, leaves them. */
static hl_status read_file(const char *dir, const char *name, bool optional,
                           hl_hf_token_ids *ids, hl_error *err)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return hl_error_set(err, HL_ERR_ARG, "%s: path too long", dir);
    size_t len;
    char *text = (char *)hl_fs_read_file(path, &len);
    if (!text && optional && errno == ENOENT)
        return HL_OK;
    if (!text)
        return hl_error_set(err, HL_ERR_IO, "%s: cannot read (%s)", path, strerror(errno));
    const hl_status st = hl_hf_token_ids_parse(text, len, path, ids, err);
    free(text);
    return st;
}

hl_status hl_hf_read_token_ids(const char *dir, hl_hf_token_ids *ids, hl_error *err)
{
    *ids = (hl_hf_token_ids){0};
    if (read_file(dir, "config.json", false, ids, err) != HL_OK ||
        read_file(dir, "generation_config.json", true, ids, err) != HL_OK)
        return err->status;
    return HL_OK;
}

bool hl_hf_token_ids_any(const hl_hf_token_ids *ids)
{
    return ids->bos.n || ids->eos.n || ids->pad.n;
}

bool hl_hf_token_ids_has_eos(const hl_hf_token_ids *ids, int id)
{
    for (int i = 0; i < ids->eos.n; i++)
        if (ids->eos.id[i] == id)
            return true;
    return false;
}

bool hl_hf_token_ids_add(cJSON *obj, const hl_hf_token_ids *ids)
{
    const hl_hf_id_list *lists[3] = {&ids->bos, &ids->eos, &ids->pad};
    for (int k = 0; k < 3; k++) {
        const hl_hf_id_list *l = lists[k];
        cJSON *v = l->n == 0 ? cJSON_CreateNull()
                   : l->n == 1 ? cJSON_CreateNumber(l->id[0])
                               : cJSON_CreateIntArray(l->id, l->n);
        if (!v || !cJSON_AddItemToObject(obj, keys[k], v)) {
            cJSON_Delete(v);
            return false;
        }
    }
    return true;
}

char *hl_hf_token_ids_format(const hl_hf_token_ids *ids)
{
    cJSON *obj = cJSON_CreateObject();
    char *text = obj && hl_hf_token_ids_add(obj, ids) ? cJSON_PrintUnformatted(obj) : NULL;
    cJSON_Delete(obj);
    return text;
}
