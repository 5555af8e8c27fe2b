/* A Hugging Face tokenizer.json into a pretrained vocabulary (vocab.h): a
 * BPE model, a ByteLevel pre-tokenizer (alone, or after a Split regex),
 * added tokens and a post-processor's template; everything else is refused
 * by name. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/pretrained_impl.h"

/* What the refusals of SentencePiece-style files say after their field. */
#define SENTENCEPIECE                                                                         \
    "a SentencePiece-style tokenizer (as Llama 1/2's and Mistral's), which is not imported; " \
    "token ids are accepted instead (--token-ids FILE)"

static const cJSON *field(const cJSON *object, const char *name)
{
    return cJSON_GetObjectItemCaseSensitive(object, name);
}

/* Whether a field is absent, null or false. */
static bool off(const cJSON *object, const char *name)
{
    const cJSON *f = field(object, name);
    return !f || cJSON_IsNull(f) || cJSON_IsFalse(f);
}

/* A ByteLevel pre-tokenizer at `at`, with or without its own regex. */
static hl_status check_byte_level(const char *path, const cJSON *p, const char *at,
                                  bool use_regex, hl_error *err)
{
    if (!off(p, "add_prefix_space"))
        return hl_error_set(err, HL_ERR_FORMAT, "%s: %s.add_prefix_space is true; only false is "
                            "supported (a space before the text changes its tokens)", path, at);
    const cJSON *regex = field(p, "use_regex");
    const bool uses = !regex || cJSON_IsTrue(regex); /* true when absent, as in tokenizers */
    if (uses != use_regex)
        return hl_error_set(err, HL_ERR_FORMAT, "%s: %s.use_regex is %s; a ByteLevel %s",
                            path, at, uses ? "true" : "false",
                            use_regex ? "alone must use GPT-2's regex"
                                      : "after a Split must not split again");
    return HL_OK;
}

/* The pre-tokenizer's regex into spec->pattern. */
static hl_status read_pre_tokenizer(const char *path, const cJSON *root, hl_pretrained_spec *spec,
                                    hl_error *err)
{
    const cJSON *p = field(root, "pre_tokenizer");
    const cJSON *type = field(p, "type");
    if (!cJSON_IsString(type))
        return hl_error_set(err, HL_ERR_FORMAT, "%s: pre_tokenizer.type is missing; a "
                            "ByteLevel, or a Sequence of a Split and a ByteLevel, is needed",
                            path);
    const char *pattern;
    if (!strcmp(type->valuestring, "ByteLevel")) {
        if (check_byte_level(path, p, "pre_tokenizer", true, err) != HL_OK)
            return err->status;
        pattern = HL_PRETRAINED_GPT2_PATTERN;
        spec->pattern_at = "GPT-2's pattern";
    } else if (!strcmp(type->valuestring, "Sequence")) {
        const cJSON *list = field(p, "pretokenizers");
        const cJSON *split = cJSON_GetArrayItem(list, 0), *bytes = cJSON_GetArrayItem(list, 1);
        const cJSON *split_type = field(split, "type"), *bytes_type = field(bytes, "type");
        if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) != 2 ||
            !cJSON_IsString(split_type) || strcmp(split_type->valuestring, "Split") ||
            !cJSON_IsString(bytes_type) || strcmp(bytes_type->valuestring, "ByteLevel"))
            return hl_error_set(err, HL_ERR_FORMAT, "%s: pre_tokenizer.pretokenizers is not "
                                "[Split, ByteLevel], the one Sequence supported", path);
        const cJSON *regex = field(field(split, "pattern"), "Regex");
        const cJSON *behavior = field(split, "behavior");
        if (!cJSON_IsString(regex))
            return hl_error_set(err, HL_ERR_FORMAT, "%s: pre_tokenizer.pretokenizers[0]."
                                "pattern.Regex is missing (a String pattern is not supported)",
                                path);
        if (!cJSON_IsString(behavior) || strcmp(behavior->valuestring, "Isolated"))
            return hl_error_set(err, HL_ERR_FORMAT, "%s: pre_tokenizer.pretokenizers[0]."
                                "behavior is not \"Isolated\", the one supported", path);
        if (!off(split, "invert"))
            return hl_error_set(err, HL_ERR_FORMAT, "%s: pre_tokenizer.pretokenizers[0]."
                                "invert is true; only false is supported", path);
        if (check_byte_level(path, bytes, "pre_tokenizer.pretokenizers[1]", false, err) != HL_OK)
            return err->status;
        pattern = regex->valuestring;
    } else if (!strcmp(type->valuestring, "Metaspace")) {
        return hl_error_set(err, HL_ERR_FORMAT, "%s: pre_tokenizer.type is \"Metaspace\": "
                            SENTENCEPIECE, path);
    } else {
        return hl_error_set(err, HL_ERR_FORMAT, "%s: pre_tokenizer.type \"%.40s\" is not "
                            "supported (ByteLevel, or a Sequence of a Split and a ByteLevel)",
                            path, type->valuestring);
    }
    if (!(spec->pattern = strdup(pattern)))
        return hl_error_set(err, HL_ERR_NOMEM, "%s: out of memory", path);
    return HL_OK;
}

/* model: a byte-level BPE's fields, checked. */
static hl_status check_model(const char *path, const cJSON *model, hl_error *err)
{
    const cJSON *type = field(model, "type");
    if (!cJSON_IsObject(model))
        return hl_error_set(err, HL_ERR_FORMAT, "%s: model is missing", path);
    if (!cJSON_IsString(type))
        return hl_error_set(err, HL_ERR_FORMAT, "%s: model.type is missing (\"BPE\" is "
                            "supported)", path);
    if (!strcmp(type->valuestring, "Unigram") || !strcmp(type->valuestring, "WordPiece"))
        return hl_error_set(err, HL_ERR_FORMAT, "%s: model.type is \"%s\": " SENTENCEPIECE,
                            path, type->valuestring);
    if (strcmp(type->valuestring, "BPE"))
        return hl_error_set(err, HL_ERR_FORMAT, "%s: model.type \"%.40s\" is not supported "
                            "(\"BPE\" is)", path, type->valuestring);
    if (!off(model, "byte_fallback"))
        return hl_error_set(err, HL_ERR_FORMAT, "%s: model.byte_fallback is true: "
                            SENTENCEPIECE, path);
    static const char *const unused[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const cJSON *f = field(model, unused[i]);
        if (f && !cJSON_IsNull(f) && !(cJSON_IsString(f) && !f->valuestring[0]))
            return hl_error_set(err, HL_ERR_FORMAT, "%s: model.%s is set; a byte-level BPE "
                                "has none", path, unused[i]);
    }
    const cJSON *dropout = field(model, "dropout");
    if (dropout && !cJSON_IsNull(dropout) && !(cJSON_IsNumber(dropout) && !dropout->valuedouble))
        return hl_error_set(err, HL_ERR_FORMAT, "%s: model.dropout is set; encoding is "
                            "deterministic here (null or 0)", path);
    return HL_OK;
}

/* model.merges, "a b" strings or ["a", "b"] pairs, by name into spec->merges. */
static hl_status read_merges(const char *path, const cJSON *merges,
                             const hl_pretrained_names *names, hl_pretrained_spec *spec,
                             hl_error *err)
{
    if (!cJSON_IsArray(merges))
        return hl_error_set(err, HL_ERR_FORMAT, "%s: model.merges is missing (a list)", path);
    const int n = cJSON_GetArraySize(merges);
    if (!(spec->merges = malloc(sizeof *spec->merges * (2 * (size_t)n + 2))))
        return hl_error_set(err, HL_ERR_NOMEM, "%s: out of memory", path);
    int i = 0;
    for (const cJSON *m = merges->child; m; m = m->next, i++) {
        const char *a = NULL, *b = NULL;
        size_t a_len = 0, b_len = 0;
        if (cJSON_IsString(m) && strchr(m->valuestring, ' ')) {
            a = m->valuestring;
            b = strchr(a, ' ') + 1;
            a_len = (size_t)(b - 1 - a);
            b_len = strchr(b, ' ') ? (size_t)-1 : strlen(b);
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 &&
                   cJSON_IsString(m->child) && cJSON_IsString(m->child->next)) {
            a = m->child->valuestring;
            b = m->child->next->valuestring;
            a_len = strlen(a);
            b_len = strlen(b);
        }
        if (!a || b_len == (size_t)-1)
            return hl_error_set(err, HL_ERR_FORMAT, "%s: model.merges[%d] is not \"a b\" or "
                                "[\"a\", \"b\"]", path, i);
        const int32_t left = hl_pretrained_names_id(names, a, a_len);
        const int32_t right = hl_pretrained_names_id(names, b, b_len);
        if (left < 0 || right < 0)
            return hl_error_set(err, HL_ERR_FORMAT, "%s: model.merges[%d] names \"%.*s\", which "
                                "is not in model.vocab", path, i,
                                (int)((left < 0 ? a_len : b_len) > 40 ? 40 : left < 0 ? a_len
                                                                                      : b_len),
                                left < 0 ? a : b);
        spec->merges[2 * i] = left;
        spec->merges[2 * i + 1] = right;
        spec->n_merges = i + 1;
    }
    return HL_OK;
}

/* added_tokens: each a token of its own, matched in the text before it is
 * pre-tokenised. */
static hl_status read_added(const char *path, const cJSON *root, hl_pretrained_spec *spec,
                            hl_error *err)
{
    const cJSON *list = field(root, "added_tokens");
    if (!list || cJSON_IsNull(list))
        return HL_OK;
    if (!cJSON_IsArray(list))
        return hl_error_set(err, HL_ERR_FORMAT, "%s: added_tokens is not a list", path);
    int i = 0;
    for (const cJSON *t = list->child; t; t = t->next, i++) {
        const cJSON *id = field(t, "id"), *content = field(t, "content");
        const double d = cJSON_IsNumber(id) ? id->valuedouble : -1;
        if (!(d >= 0 && d < HL_VOCAB_MAX && d == (double)(int32_t)d))
            return hl_error_set(err, HL_ERR_FORMAT, "%s: added_tokens[%d].id is not an id in "
                                "0..%d", path, i, HL_VOCAB_MAX - 1);
        if (!cJSON_IsString(content) || !content->valuestring[0])
            return hl_error_set(err, HL_ERR_FORMAT, "%s: added_tokens[%d].content is not a "
                                "text", path, i);
        static const char *const unsupported[] = {"lstrip", "rstrip", "single_word"};
        for (int k = 0; k < 3; k++)
            if (!off(t, unsupported[k]))
                return hl_error_set(err, HL_ERR_FORMAT, "%s: added_tokens[%d].%s is true; "
                                    "only false is supported", path, i, unsupported[k]);
        const int32_t token = (int32_t)d;
        const char *s = content->valuestring;
        const size_t len = strlen(s);
        if (token < spec->size && spec->present[token]) {
            /* Also in model.vocab (GPT-2's <|endoftext|>): the same bytes. */
            if (spec->len[token] != len || memcmp(spec->bytes + spec->start[token], s, len))
                return hl_error_set(err, HL_ERR_FORMAT, "%s: added_tokens[%d] gives id %ld to "
                                    "\"%.40s\", which model.vocab gives to another piece",
                                    path, i, (long)token, s);
        } else if (!hl_pretrained_spec_set(spec, token, (const unsigned char *)s, len)) {
            return hl_error_set(err, HL_ERR_NOMEM, "%s: out of memory", path);
        }
        spec->added[token] = true;
    }
    return HL_OK;
}

/* One TemplateProcessing: its "single" template, each SpecialToken by its
 * ids in "special_tokens", the input ("Sequence" A) once. */
static hl_status read_template(const char *path, const cJSON *pp, hl_pretrained_template *t,
                               hl_error *err)
{
    const cJSON *single = field(pp, "single"), *specials = field(pp, "special_tokens");
    if (!cJSON_IsArray(single))
        return hl_error_set(err, HL_ERR_FORMAT, "%s: post_processor.single is not a list",
                            path);
    *t = (hl_pretrained_template){.before = -1};
    int i = 0;
    for (const cJSON *item = single->child; item; item = item->next, i++) {
        const cJSON *special = field(item, "SpecialToken"), *seq = field(item, "Sequence");
        const cJSON *name = field(special ? special : seq, "id");
        if (!cJSON_IsString(name) || (special != NULL) == (seq != NULL))
            return hl_error_set(err, HL_ERR_FORMAT, "%s: post_processor.single[%d] is not "
                                "{\"SpecialToken\": {\"id\": ...}} or {\"Sequence\": "
                                "{\"id\": \"A\"}}", path, i);
        if (seq) {
            if (strcmp(name->valuestring, "A") || t->before >= 0)
                return hl_error_set(err, HL_ERR_FORMAT, "%s: post_processor.single[%d] is "
                                    "Sequence %.20s; a single input's template holds "
                                    "Sequence A once", path, i, name->valuestring);
            t->before = t->n;
            continue;
        }
        const cJSON *ids = field(field(specials, name->valuestring), "ids");
        if (!cJSON_IsArray(ids))
            return hl_error_set(err, HL_ERR_FORMAT, "%s: post_processor.special_tokens has no "
                                "ids for \"%.40s\"", path, name->valuestring);
        for (const cJSON *id = ids->child; id; id = id->next) {
            const double d = cJSON_IsNumber(id) ? id->valuedouble : -1;
            if (!(d >= 0 && d < HL_VOCAB_MAX && d == (double)(int32_t)d))
                return hl_error_set(err, HL_ERR_FORMAT, "%s: post_processor.special_tokens"
                                    "[\"%.40s\"].ids holds something other than ids of "
                                    "0..%d", path, name->valuestring, HL_VOCAB_MAX - 1);
            if (t->n == HL_PRETRAINED_TEMPLATE_MAX)
                return hl_error_set(err, HL_ERR_FORMAT, "%s: post_processor.single adds more "
                                    "than %d tokens", path, HL_PRETRAINED_TEMPLATE_MAX);
            t->ids[t->n++] = (int32_t)d;
        }
    }
    if (t->before < 0)
        return hl_error_set(err, HL_ERR_FORMAT, "%s: post_processor.single has no Sequence A",
                            path);
    return HL_OK;
}

/* The post-processor: none, ByteLevel (which moves offsets only), a
 * TemplateProcessing, or a Sequence of them with one template at most. */
static hl_status read_post_processor(const char *path, const cJSON *root,
                                     hl_pretrained_spec *spec, hl_error *err)
{
    const cJSON *pp = field(root, "post_processor");
    if (!pp || cJSON_IsNull(pp))
        return HL_OK;
    const cJSON *type = field(pp, "type");
    const bool sequence = cJSON_IsString(type) && !strcmp(type->valuestring, "Sequence");
    const cJSON *list = sequence ? field(pp, "processors") : NULL;
    if (sequence && !cJSON_IsArray(list))
        return hl_error_set(err, HL_ERR_FORMAT, "%s: post_processor.processors is not a list",
                            path);
    bool templated = false;
    for (const cJSON *one = sequence ? list->child : pp; one; one = sequence ? one->next : NULL) {
        type = field(one, "type");
        if (!cJSON_IsString(type))
            return hl_error_set(err, HL_ERR_FORMAT, "%s: post_processor%s has no type", path,
                                sequence ? ".processors[...]" : "");
        const char *kind = type->valuestring;
        if (!strcmp(kind, "ByteLevel"))
            continue;
        if (strcmp(kind, "TemplateProcessing"))
            return hl_error_set(err, HL_ERR_FORMAT, "%s: post_processor %.40s is not supported "
                                "(ByteLevel, TemplateProcessing, or a Sequence of them)", path,
                                kind);
        if (templated)
            return hl_error_set(err, HL_ERR_FORMAT, "%s: post_processor holds a second "
                                "TemplateProcessing", path);
        if (read_template(path, one, &spec->template, err) != HL_OK)
            return err->status;
        templated = true;
    }
    return HL_OK;
}

hl_vocab *hl_pretrained_load_json(const char *path, const char *text, size_t n, hl_error *err)
{
    char vocab_at[4200], merges_at[4200], pattern_at[4200], template_at[4200];
    snprintf(vocab_at, sizeof vocab_at, "%s: model.vocab", path);
    snprintf(merges_at, sizeof merges_at, "%s: model.merges", path);
    snprintf(pattern_at, sizeof pattern_at, "%s: pre_tokenizer's regex", path);
    snprintf(template_at, sizeof template_at, "%s: post_processor's template", path);
    hl_pretrained_spec spec = {.vocab_at = vocab_at, .merges_at = merges_at,
                               .pattern_at = pattern_at, .template_at = template_at};
    hl_pretrained_names *names = NULL;
    hl_vocab *v = NULL;
    cJSON *root = hl_pretrained_parse_json(path, text, n, err);
    if (!root)
        return NULL;
    const cJSON *model = field(root, "model"), *normalizer = field(root, "normalizer");
    if (!cJSON_IsObject(root)) {
        hl_error_set(err, HL_ERR_FORMAT, "%s: not a JSON object", path);
        goto done;
    }
    /* NFC (Qwen2's, GPT-NeoX's) composes the text first; any other
     * normalizer (SentencePiece's replacements, lowercasing) is refused. */
    const cJSON *kind = normalizer ? field(normalizer, "type") : NULL;
    spec.nfc = cJSON_IsObject(normalizer) && cJSON_IsString(kind) &&
               !strcmp(kind->valuestring, "NFC") && cJSON_GetArraySize(normalizer) == 1;
    if (normalizer && !cJSON_IsNull(normalizer) && !spec.nfc) {
        hl_error_set(err, HL_ERR_FORMAT, "%s: normalizer is set (only null or NFC is "
                     "supported): " SENTENCEPIECE, path);
        goto done;
    }
    if (check_model(path, model, err) != HL_OK ||
        read_pre_tokenizer(path, root, &spec, err) != HL_OK)
        goto done;
    if (!field(model, "vocab")) {
        hl_error_set(err, HL_ERR_FORMAT, "%s: model.vocab is missing", path);
        goto done;
    }
    if (!(names = hl_pretrained_names_read(field(model, "vocab"), &spec, vocab_at, err)) ||
        read_merges(path, field(model, "merges"), names, &spec, err) != HL_OK ||
        read_added(path, root, &spec, err) != HL_OK ||
        read_post_processor(path, root, &spec, err) != HL_OK)
        goto done;
    spec.ignore_merges = !off(model, "ignore_merges");
    v = hl_pretrained_build(&spec, err);
done:
    hl_pretrained_names_free(names);
    cJSON_Delete(root);
    hl_pretrained_spec_free(&spec);
    return v;
}
