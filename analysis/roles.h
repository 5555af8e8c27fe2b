/*
 * roles.h: what a head's detector scores (analysis/detectors.h) make of it —
 * the roles it takes, and the one detector it is known by in pictures and
 * tables. One labeller for every program: a role is on when its score reaches
 * its threshold (below), and a head is labelled by all its roles that are on
 * (hl_head_roles) or by the first of them in an order of priority
 * (hl_head_label_role, toy_heads' pictures and table).
 *
 *     char roles[128];
 *     printf("L1H3 %s\n", hl_head_roles(&scores[1 * n_heads + 3], roles, sizeof roles));
 */
#ifndef HL_ROLES_H
#define HL_ROLES_H

#include <stddef.h>

#include "analysis/detectors.h"

/* A head takes every role whose detector reaches its threshold. */
#define HL_ROLE_PREVIOUS 0.5   /* previous_token */
#define HL_ROLE_TWO_BACK 0.5   /* two_back */
#define HL_ROLE_DUPLICATE 0.5  /* duplicate_token */
#define HL_ROLE_INDUCTION 0.3  /* induction */
#define HL_ROLE_COPYING 0.5    /* copying */
#define HL_ROLE_FIRST 0.5      /* first_token */
#define HL_ROLE_LOCAL 0.7      /* local, when neither previous-token nor two-back */
#define HL_ROLE_SELF 0.5       /* self */

/* A role a head may take: on when score >= threshold (a NaN score never is). */
typedef struct hl_role {
    const char *name;
    double score, threshold;
} hl_role;

/* The roles of roles[0..n) that are on, in their order, joined by '+'
 * ("induction+copying"), or "-" when none is: into buf. */
const char *hl_roles_join(const hl_role *roles, int n, char *buf, size_t size);

/* The first role of roles[0..n) that is on (their order is their priority),
 * or NULL when none is. */
const hl_role *hl_roles_first(const hl_role *roles, int n);

/* hl_roles_join over the detectors' roles at the thresholds above:
 * "previous-token", "two-back", "duplicate-token", "induction", "copying",
 * "first-token", "local" (when neither previous-token nor two-back) and
 * "self". */
const char *hl_head_roles(const hl_head_scores *s, char *buf, size_t size);

/* The role a head is labelled by in a picture, by priority: "previous-token"
 * (previous_token), "two-back" (two_back), "induction", "first-token" (first_token),
 * the first on at the thresholds above, or NULL. roles has room for
 * HL_LABEL_ROLES; the result points into it. */
#define HL_LABEL_ROLES 4
const hl_role *hl_head_label_role(const hl_head_scores *s, hl_role *roles);

/* The detector a head is known by: induction when it reaches the induction
 * threshold, else the largest of previous, duplicate, induction, first and
 * self (local is left out: it contains previous). */
hl_detector hl_head_main_detector(const hl_head_scores *s);

#endif
