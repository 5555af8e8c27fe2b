/* Roles from scores: see roles.h. */
#include "analysis/roles.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>

static bool role_on(const hl_role *r)
{
    return r->score >= r->threshold;
}

const char *hl_roles_join(const hl_role *roles, int n, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n; i++)
        if (role_on(&roles[i]) && used < size)
            used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? "+" : "",
                                     roles[i].name);
    if (!used)
        snprintf(buf, size, "-");
    return buf;
}

const hl_role *hl_roles_first(const hl_role *roles, int n)
{
    for (int i = 0; i < n; i++)
        if (role_on(&roles[i]))
            return &roles[i];
    return NULL;
}

const char *hl_head_roles(const hl_head_scores *s, char *buf, size_t size)
{
    const double *v = s->v;
    const bool near = v[HL_DETECT_PREVIOUS] >= HL_ROLE_PREVIOUS ||
                      v[HL_DETECT_TWO_BACK] >= HL_ROLE_TWO_BACK;
    const hl_role roles[] = {
        {"previous-token", v[HL_DETECT_PREVIOUS], HL_ROLE_PREVIOUS},
        {"two-back", v[HL_DETECT_TWO_BACK], HL_ROLE_TWO_BACK},
        {"duplicate-token", v[HL_DETECT_DUPLICATE], HL_ROLE_DUPLICATE},
        {"induction", v[HL_DETECT_INDUCTION], HL_ROLE_INDUCTION},
        {"copying", v[HL_DETECT_COPYING], HL_ROLE_COPYING},
        {"first-token", v[HL_DETECT_FIRST], HL_ROLE_FIRST},
        {"local", near ? NAN : v[HL_DETECT_LOCAL], HL_ROLE_LOCAL},
        {"self", v[HL_DETECT_SELF], HL_ROLE_SELF},
    };
    return hl_roles_join(roles, (int)(sizeof roles / sizeof roles[0]), buf, size);
}

const hl_role *hl_head_label_role(const hl_head_scores *s, hl_role *roles)
{
    const double *v = s->v;
    roles[0] = (hl_role){"previous-token", v[HL_DETECT_PREVIOUS], HL_ROLE_PREVIOUS};
    roles[1] = (hl_role){"two-back", v[HL_DETECT_TWO_BACK], HL_ROLE_TWO_BACK};
    roles[2] = (hl_role){"induction", v[HL_DETECT_INDUCTION], HL_ROLE_INDUCTION};
    roles[3] = (hl_role){"first-token", v[HL_DETECT_FIRST], HL_ROLE_FIRST};
    return hl_roles_first(roles, HL_LABEL_ROLES);
}

hl_detector hl_head_main_detector(const hl_head_scores *s)
{
    if (s->v[HL_DETECT_INDUCTION] >= HL_ROLE_INDUCTION)
        return HL_DETECT_INDUCTION;
    const hl_detector candidates[] = {HL_DETECT_PREVIOUS, HL_DETECT_DUPLICATE, HL_DETECT_INDUCTION,
                                      HL_DETECT_FIRST, HL_DETECT_SELF};
    hl_detector best = HL_DETECT_PREVIOUS;
    for (size_t i = 1; i < sizeof candidates / sizeof candidates[0]; i++)
        if (s->v[candidates[i]] > s->v[best])
            best = candidates[i];
    return best;
}
