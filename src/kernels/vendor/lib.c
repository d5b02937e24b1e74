/* lib.c -- the registry of vendor-library providers (lib.h): those found at build time. */
#include "kernels/vendor/lib.h"

#include <string.h>

#ifdef WPK_HAVE_ONEDNN
extern const lib_provider lib_onednn;
#endif
#ifdef WPK_HAVE_OPENBLAS
extern const lib_provider lib_openblas;
#endif

static const lib_provider *const providers[] = {
#ifdef WPK_HAVE_ONEDNN
    &lib_onednn,
#endif
#ifdef WPK_HAVE_OPENBLAS
    &lib_openblas,
#endif
    NULL,
};

const lib_provider *const *lib_providers(void) { return providers; }

const lib_provider *lib_provider_find(const char *name) {
    for (int i = 0; providers[i]; i++)
        if (!strcmp(providers[i]->name, name)) return providers[i];
    return NULL;
}
