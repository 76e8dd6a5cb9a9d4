/* fixture.c: see fixture.h. */
#include "fixture.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

void fixture_temp_file(char *template, int suffix_len, const char *text)
{
    int fd = mkstemps(template, suffix_len);
    ck_assert_msg(fd >= 0, "cannot make %s", template);
    FILE *file = fdopen(fd, "w");
    ck_assert(file);
    ck_assert(fputs(text, file) >= 0);
    ck_assert(fclose(file) == 0);
}

Fixture fixture_open(kjit_target target, const char *file, const char *source)
{
    Fixture f = {.target = target};
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    options.num_threads = target == KJIT_TARGET_PARALLEL ? 3 : 0;
    ck_assert_int_eq(kjit_context_create(&options, &f.context), KJIT_OK);
    kjit_status status = kjit_compile_string(f.context, file, source, &f.module);
    ck_assert_msg(status == KJIT_OK, "compile: %s", kjit_last_error(f.context));
    return f;
}

void fixture_close(Fixture *f)
{
    kjit_module_free(f->module);
    kjit_context_destroy(f->context);
}

kjit_function *fixture_fn(Fixture *f, const char *name)
{
    kjit_function *function = NULL;
    ck_assert_msg(kjit_module_function(f->module, name, &function) == KJIT_OK, "no function %s",
                  name);
    return function;
}

Pair pair_open(kjit_target target, const char *file, const char *source)
{
    Pair p;
    for (int simd = 0; simd < 2; simd++) {
        kjit_options options;
        kjit_options_init(&options);
        options.target = target;
        options.num_threads = 3;
        options.cpu_simd = simd;
        ck_assert_int_eq(kjit_context_create(&options, &p.context[simd]), KJIT_OK);
        ck_assert_msg(kjit_compile_string(p.context[simd], file, source, &p.module[simd]) == KJIT_OK,
                      "%s", kjit_last_error(p.context[simd]));
    }
    return p;
}

void pair_close(Pair *p)
{
    for (int simd = 0; simd < 2; simd++) {
        kjit_module_free(p->module[simd]);
        kjit_context_destroy(p->context[simd]);
    }
}

kjit_function *pair_fn(Pair *p, int simd, const char *name)
{
    kjit_function *fn = NULL;
    ck_assert_msg(kjit_module_function(p->module[simd], name, &fn) == KJIT_OK, "no function %s", name);
    return fn;
}

void pair_launch(Pair *p, int simd, const char *name, const uint32_t grid[3], const uint32_t block[3],
                 kjit_arg *args, int nargs)
{
    ck_assert_msg(kjit_launch(pair_fn(p, simd, name), grid, block, args, nargs, NULL) == KJIT_OK,
                  "%s: %s", name, kjit_last_error(p->context[simd]));
}
