/*
 * rules.c: tests/modes/rules.txt, what the harness must know about a few
 * functions: an input recipe to start from, an array's length, and the
 * documented exceptions (results that depend on the order threads run in,
 * functions not run, cuda differences).  One rule a line:
 *
 *   FILE FUNCTION start tame|index     REASON
 *   FILE FUNCTION length PARAM=N[xM..] REASON
 *   FILE FUNCTION order [argN]         REASON   (argN: that output only)
 *   FILE FUNCTION undefined [argN]     REASON
 *   FILE FUNCTION skip                 REASON
 *   FILE FUNCTION cuda [argN]          REASON   (argN: that output only)
 *   FILE FUNCTION launch GX,GY,GZ/BX,BY,BZ REASON   (one case each)
 *   FILE FUNCTION racy                 REASON   (not run under the race checker)
 *
 * FILE is the source's file (a unit test's .c file for its literals, or
 * FILE:LINE for the literal that starts on that line), FUNCTION a name or
 * "*".  Every rule needs its reason; '#' starts a comment.
 */
#include "modes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {"start", "length", "order", "skip", "cuda", "launch", "undefined",
                                         "racy"};

static char *word(char **p)
{
    char *s = *p;
    while (*s == ' ' || *s == '\t')
        s++;
    if (!*s)
        return NULL;
    char *start = s;
    while (*s && *s != ' ' && *s != '\t')
        s++;
    if (*s)
        *s++ = 0;
    *p = s;
    return start;
}

static bool parse_shape(const char *text, ModesRule *rule)
{
    rule->ndim = 0;
    const char *s = text;
    while (*s) {
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s || v < 0 || rule->ndim == KJIT_MAX_DIMS)
            return false;
        rule->shape[rule->ndim++] = v;
        s = end;
        if (*s == 'x')
            s++;
        else if (*s)
            return false;
    }
    return rule->ndim > 0;
}

bool modes_rules_read(const char *path, ModesRules *out)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "modes: cannot read the rules file %s\n", path);
        return false;
    }
    *out = (ModesRules){0};
    char line[1024];
    int number = 0;
    bool ok = true;
    while (fgets(line, sizeof line, f)) {
        number++;
        line[strcspn(line, "\r\n")] = 0;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        char *p = line;
        char *file = word(&p);
        if (!file)
            continue;
        char *function = word(&p), *kind = word(&p);
        ModesRule rule = {0};
        int k = -1;
        for (int i = 0; kind && i < (int)(sizeof kind_names / sizeof *kind_names); i++)
            if (strcmp(kind, kind_names[i]) == 0)
                k = i;
        if (!function || k < 0) {
            fprintf(stderr, "%s:%d: expected FILE FUNCTION start|length|order|undefined|skip|cuda|launch|racy ...\n",
                    path, number);
            ok = false;
            continue;
        }
        rule.kind = (ModesRuleKind)k;
        if (rule.kind == RULE_START) {
            char *name = word(&p);
            rule.recipe = name ? modes_recipe_from_name(name) : -1;
            if (rule.recipe < 0) {
                fprintf(stderr, "%s:%d: start needs a recipe (wild, tame, index)\n", path, number);
                ok = false;
                continue;
            }
        } else if (rule.kind == RULE_LENGTH) {
            char *spec = word(&p);
            char *eq = spec ? strchr(spec, '=') : NULL;
            if (!eq || !parse_shape(eq + 1, &rule)) {
                fprintf(stderr, "%s:%d: length needs PARAM=N or PARAM=NxM\n", path, number);
                ok = false;
                continue;
            }
            *eq = 0;
            rule.param = strdup(spec);
        } else if (rule.kind == RULE_LAUNCH) {
            char *spec = word(&p);
            unsigned *g = rule.grid, *b = rule.block;
            if (!spec || sscanf(spec, "%u,%u,%u/%u,%u,%u", &g[0], &g[1], &g[2], &b[0], &b[1], &b[2]) != 6 ||
                !g[0] || !g[1] || !g[2] || !b[0] || !b[1] || !b[2]) {
                fprintf(stderr, "%s:%d: launch needs GX,GY,GZ/BX,BY,BZ\n", path, number);
                ok = false;
                continue;
            }
        }
        if (rule.kind == RULE_ORDER || rule.kind == RULE_UNDEFINED || rule.kind == RULE_CUDA) { /* one output only? */
            char *q = p;
            while (*q == ' ' || *q == '\t')
                q++;
            if (strncmp(q, "arg", 3) == 0 && q[3] >= '0' && q[3] <= '9') {
                char *spec = word(&p);
                rule.param = strdup(spec);
            }
        }
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p) {
            fprintf(stderr, "%s:%d: a rule needs its reason\n", path, number);
            ok = false;
            continue;
        }
        rule.file = strdup(file);
        rule.function = strdup(function);
        rule.reason = strdup(p);
        out->rules = realloc(out->rules, (size_t)(out->count + 1) * sizeof *out->rules);
        out->rules[out->count++] = rule;
    }
    fclose(f);
    return ok;
}

bool modes_rule_applies(const ModesRule *rule, const ModesSource *source, const char *function)
{
    return (strcmp(rule->file, source->file) == 0 || strcmp(rule->file, source->name) == 0) &&
           (strcmp(rule->function, "*") == 0 || strcmp(rule->function, function) == 0);
}

ModesRule *modes_rule_find(ModesRules *rules, ModesRuleKind kind, const ModesSource *source,
                           const char *function)
{
    for (int i = 0; i < rules->count; i++) {
        ModesRule *r = &rules->rules[i];
        if (r->kind == kind && modes_rule_applies(r, source, function)) {
            r->used = 1;
            return r;
        }
    }
    return NULL;
}
