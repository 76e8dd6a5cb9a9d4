/* fixture.c: see fixture.h. */
#include "fixture.h"

#include <check.h>

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
