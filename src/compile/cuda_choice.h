/* cuda_choice.h -- the CUDA target's choice from the tuning records: per task of the CUDA
 * program (compile/cuda_program.h) the fastest config `wpk tune --target cuda` stored for this
 * GPU (its finals' winner when the tuner re-measured them, else the fastest trial), given to
 * tune_cuda_program_options.choose. A record that no longer fits the template's space is
 * passed over (the template's default runs). A node may get a CUDA library's kernel instead
 * where the library's record beats the template's (cuda_choice_lib). */
#ifndef WPK_COMPILE_CUDA_CHOICE_H
#define WPK_COMPILE_CUDA_CHOICE_H

#include "compile/cuda_program.h"
#include "runtime/cuda/cuda_rt.h"
#include "tune/records.h"

typedef struct cuda_choice {
    tune_db *db;          /* borrowed; NULL: nothing is chosen */
    char target[700];     /* the records' key for the GPU (tune_cuda_target) */
    int chosen, asked;    /* tasks given a record's config, tasks asked about */
    int libs;             /* nodes given a CUDA library's kernel */
} cuda_choice;

/* Choose from db (borrowed, may be NULL; must outlive c's use) for the GPU info describes. */
void cuda_choice_init(cuda_choice *c, tune_db *db, const rt_cuda_info *info);

/* tune_cuda_program_options.choose over a cuda_choice (user). */
bool cuda_choice_pick(void *user, const tune_task *t, const tune_space *s, tune_config *cfg);

/* tune_cuda_program_options.choose_lib over a cuda_choice (user): of the CUDA libraries that
 * take t's node (cuDNN, cuBLAS, cuBLASLt), the one whose best record for this GPU (its key
 * "<library>|...", config "algo=<i>") is faster than the template's best record, or the fastest
 * library record where the template has none; NULL when no library record wins. */
const kernel_provider *cuda_choice_lib(void *user, const tune_task *t, int *config);

#endif
