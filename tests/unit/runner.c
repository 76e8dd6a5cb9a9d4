/* The one Check runner: every suite listed in build/gen/suites.h (made by the
 * Makefile from the tests/unit/test_<name>.c files). */
#include <check.h>
#include <stdlib.h>

#define X(name) Suite *suite_##name(void);
#include "suites.h"
#undef X

int main(void)
{
    SRunner *runner = srunner_create(NULL);
#define X(name) srunner_add_suite(runner, suite_##name());
#include "suites.h"
#undef X
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
