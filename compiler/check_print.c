/*
 * check_print.c: the checker's rule for print(...), which builds one PRINT
 * IR op holding a C printf format and the values it formats.
 *
 * The rule (docs/language.md, "Printing"): the arguments are string literals
 * and scalar numbers (ints, floats, bool, complex).  A string is printed as
 * it is, except that its printf conversions (%d %i %u %x %X %o %f %F %e %E
 * %g %G %a %A, with flags, a width and a precision; %% for '%') each take the
 * next argument, which must be a number of a matching kind; a number that no
 * conversion takes is printed in its default form (%d, %u, %g, true/false,
 * (re+imj)).  The pieces are joined by one space and the line ends with a
 * newline, as Python's print does.  Conversions are checked here against the
 * arguments' types, so the back ends never see a bad format.
 *
 * The format's conversions match the values as the back ends pass them, C's
 * varargs promotion: ints of up to 32 bits as i32, 64-bit ones as i64 ("ll"),
 * floats as f64, a complex as two f64, a bool as a string pointer ("%s").
 */
#include "checker.h"

#include <string.h>

/* vprintf on cuda takes at most 32 values after its format. */
#define KJ_PRINT_MAX_VALUES 32

static bool is_int_conversion(char conv) { return conv && strchr("diuxXo", conv); }
static bool is_float_conversion(char conv) { return conv && strchr("fFeEgGaA", conv); }

/* The default form of a value of type t. */
static void default_form(KjBuf *fmt, const KjType *t)
{
    if (t->kind == KJ_TYPE_BOOL)
        kj_buf_printf(fmt, "%%s");
    else if (kj_type_is_int(t))
        kj_buf_printf(fmt, "%%%s%c", kj_type_int_bits(t) == 64 ? "ll" : "",
                      kj_type_is_signed(t) ? 'd' : 'u');
    else if (kj_type_is_complex(t))
        kj_buf_printf(fmt, "(%%g%%+gj)");
    else
        kj_buf_printf(fmt, "%%g");
}

/* A value print can take: settled, scalar; NULL (and an error) otherwise. */
static KjIrExpr *print_value(KjChecker *c, KjNode *arg, KjIrExpr *e, int index)
{
    if (!e)
        return NULL;
    e = kj_check_settle_default(c, e);
    if (!e)
        return NULL;
    if (!kj_check_is_scalar(e->type)) {
        kj_error(c->diag, arg->loc, "print takes numbers, bools and strings; argument %d is %s",
                 index + 1, e->type->kind == KJ_TYPE_VOID ? "a call that returns nothing"
                                                           : kj_type_name(e->type));
        return NULL;
    }
    return e;
}

/* One conversion of a string: its text from '%' in spec; the value it takes
 * (arg at loc); appends the conversion for the value's type to fmt and
 * returns the value as passed (a bool becomes an i32), NULL after an error. */
static KjIrExpr *convert_for(KjChecker *c, KjBuf *fmt, const char *spec, int spec_len,
                             KjIrExpr *value, KjLoc loc)
{
    char conv = spec[spec_len - 1];
    const KjType *t = value->type;
    if (is_int_conversion(conv)) {
        if (t->kind == KJ_TYPE_BOOL) { /* 0 or 1 */
            KjIrExpr *cast = kj_check_new_expr(c, KJ_IR_CAST, kj_check_t_i32(), loc, 1);
            cast->args[0] = value;
            value = cast;
            t = value->type;
        }
        if (!kj_type_is_int(t)) {
            kj_error(c->diag, loc, "'%.*s' formats an integer, but this argument is %s",
                     spec_len, spec, kj_type_name(t));
            return NULL;
        }
        if (conv == 'd' || conv == 'i')
            conv = kj_type_is_signed(t) ? 'd' : 'u';
        kj_buf_printf(fmt, "%.*s%s%c", spec_len - 1, spec, kj_type_int_bits(t) == 64 ? "ll" : "",
                      conv);
        return value;
    }
    if (!kj_type_is_float(t) && !kj_type_is_complex(t)) {
        kj_error(c->diag, loc, "'%.*s' formats a float, but this argument is %s; convert it: "
                 "f64(x)", spec_len, spec, kj_type_name(t));
        return NULL;
    }
    if (kj_type_is_float(t)) {
        kj_buf_printf(fmt, "%.*s", spec_len, spec);
        return value;
    }
    /* A complex: both parts in the conversion, the imaginary one signed. */
    kj_buf_printf(fmt, "(%.*s%%+%.*sj)", spec_len, spec, spec_len - 1, spec + 1);
    return value;
}

/* Where the character `offset` bytes into a string literal's decoded text
 * (the literal at loc, its opening quote) stands in the source. */
static KjLoc loc_in_string(KjLoc loc, int offset)
{
    if (!loc.src)
        return loc;
    const char *p = loc.src->text;
    for (int line = 1; line < loc.line && *p; p++)
        if (*p == '\n')
            line++;
    const char *raw = p + loc.col; /* just after the quote */
    int j = 0;
    for (int k = 0; k < offset && raw[j] && raw[j] != '\n'; k++)
        j += raw[j] == '\\' ? 2 : 1;
    loc.col += 1 + j;
    return loc;
}

/* The length of the conversion at s[0] == '%' (flags, width, precision and
 * the conversion character); 0 after an error, reported at loc. */
static int conversion_length(KjChecker *c, const char *s, KjLoc loc)
{
    int i = 1;
    while (s[i] && strchr("-+ #0", s[i]))
        i++;
    while (s[i] >= '0' && s[i] <= '9')
        i++;
    if (s[i] == '.') {
        i++;
        while (s[i] >= '0' && s[i] <= '9')
            i++;
    }
    if (is_int_conversion(s[i]) || is_float_conversion(s[i]))
        return i + 1;
    if (s[i] && strchr("hlLqjzt", s[i])) {
        kj_error(c->diag, loc, "'%.*s': print needs no length modifier; it takes the size "
                 "from the argument's type", i + 1, s);
        return 0;
    }
    if (s[i] == '*') {
        kj_error(c->diag, loc, "'%.*s': write a width or precision as digits", i + 1, s);
        return 0;
    }
    kj_error(c->diag, loc, "'%.*s' is not a conversion print knows: %%d %%i %%u %%x %%X %%o "
             "%%f %%F %%e %%E %%g %%G %%a %%A (flags, width and precision allowed), or %%%% "
             "for '%%'", s[i] ? i + 1 : i, s);
    return 0;
}

KjIrExpr *kj_check_print(KjChecker *c, KjNode *n, const KjCheckBuiltin *b, KjIrExpr **args)
{
    int count = n->args.count;
    KjIrExpr **values = kj_arena_alloc(c->arena, sizeof *values * (size_t)(count + 1));
    bool *taken = kj_arena_alloc(c->arena, sizeof *taken * (size_t)(count + 1));
    bool ok = true;
    for (int i = 0; i < count; i++) {
        KjNode *arg = n->args.items[i];
        if (arg->kind != KJ_NODE_STRING_LIT && !(values[i] = print_value(c, arg, args[i], i)))
            ok = false;
    }
    if (!ok)
        return NULL;

    KjBuf fmt = {0};
    kj_buf_printf(&fmt, "%s", "");
    KjIrExpr **passed = kj_arena_alloc(c->arena, sizeof *passed * (size_t)(count + 1));
    int passed_count = 0, slots = 0;
    for (int i = 0; i < count && ok; i++) {
        KjNode *arg = n->args.items[i];
        if (taken[i])
            continue;
        if (fmt.len > 0)
            kj_buf_printf(&fmt, " ");
        if (arg->kind != KJ_NODE_STRING_LIT) {
            default_form(&fmt, values[i]->type);
            passed[passed_count++] = values[i];
            slots += kj_type_is_complex(values[i]->type) ? 2 : 1;
            continue;
        }
        int next = i + 1;
        for (const char *s = arg->name; *s && ok; s++) {
            if (*s != '%') {
                kj_buf_printf(&fmt, "%c", *s);
                continue;
            }
            if (s[1] == '%') {
                kj_buf_printf(&fmt, "%%%%");
                s++;
                continue;
            }
            KjLoc at = loc_in_string(arg->loc, (int)(s - arg->name));
            int len = conversion_length(c, s, at);
            if (!len) {
                ok = false;
                break;
            }
            if (next >= count || ((KjNode *)n->args.items[next])->kind == KJ_NODE_STRING_LIT) {
                kj_error(c->diag, at, "'%.*s' in this string has no number to format: "
                         "put one after the string", len, s);
                ok = false;
                break;
            }
            KjNode *vnode = n->args.items[next];
            KjIrExpr *v = convert_for(c, &fmt, s, len, values[next], vnode->loc);
            if (!v) {
                ok = false;
                break;
            }
            taken[next++] = true;
            passed[passed_count++] = v;
            slots += kj_type_is_complex(v->type) ? 2 : 1;
            s += len - 1;
        }
    }
    if (ok && slots > KJ_PRINT_MAX_VALUES) {
        kj_error(c->diag, n->loc, "print formats at most %d values in one line (a complex "
                 "counts as two); this one has %d", KJ_PRINT_MAX_VALUES, slots);
        ok = false;
    }
    kj_buf_printf(&fmt, "\n");
    KjIrExpr *e = NULL;
    if (ok) {
        e = kj_check_new_expr(c, KJ_IR_PRINT, kj_type_void(), n->loc, passed_count);
        for (int i = 0; i < passed_count; i++)
            e->args[i] = passed[i];
        e->format = kj_arena_strdup(c->arena, fmt.data);
        kj_check_note_impure(c);
    }
    kj_buf_free(&fmt);
    return e;
}
