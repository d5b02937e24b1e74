/* test_space.c -- knob spaces: size, text round trip, parse errors, random and indexed configs. */
#include <stdlib.h>

#include "check.h"
#include "kernels/space.h"

int main(void) {
    wpk_context *ctx = wpk_context_create();
    tune_space s = {0};
    int64_t tiles[] = {1, 2, 4, 8, 8, 16};
    int64_t flag[] = {0, 1};
    CHECK(tune_space_add(&s, "tile_ow", 6, tiles) == WPK_OK);
    CHECK(tune_space_add(&s, "pack", 2, flag) == WPK_OK);
    CHECK(s.knobs[0].nvalues == 5); /* the duplicate 8 is dropped */
    CHECK(tune_space_size(&s) == 10);

    tune_config c = {{0}};
    tune_config_set(&s, &c, "tile_ow", 7);
    tune_config_set(&s, &c, "pack", 1);
    CHECK(tune_config_get(&s, &c, "tile_ow", -1) == 8);
    CHECK(tune_config_get(&s, &c, "nosuch", -1) == -1);
    strbuf b = {0};
    tune_config_print(&s, &c, &b);
    CHECK(b.s && strcmp(b.s, "tile_ow=8,pack=1") == 0);
    tune_config back;
    CHECK(tune_config_parse(ctx, &s, b.s, &back) == WPK_OK);
    CHECK(back.choice[0] == c.choice[0] && back.choice[1] == c.choice[1]);
    sb_free(&b);

    CHECK_ERR(ctx, tune_config_parse(ctx, &s, "tile_ow=3,pack=1", &back), WPK_ERR_INVALID_ARG,
              "3 is not a legal value of knob 'tile_ow'");
    CHECK_ERR(ctx, tune_config_parse(ctx, &s, "tile_ow=4", &back), WPK_ERR_INVALID_ARG,
              "knob 'pack' is missing");
    CHECK_ERR(ctx, tune_config_parse(ctx, &s, "tile_oh=4,pack=0", &back), WPK_ERR_INVALID_ARG,
              "no knob 'tile_oh'");
    CHECK_ERR(ctx, tune_config_parse(ctx, &s, "tile_ow=x,pack=0", &back), WPK_ERR_INVALID_ARG,
              "needs an integer");

    /* every index maps to a distinct config; random configs are legal and seeded */
    int seen[5][2] = {{0}};
    for (int64_t i = 0; i < tune_space_size(&s); i++) {
        tune_config_from_index(&s, i, &c);
        seen[c.choice[0]][c.choice[1]]++;
    }
    for (int i = 0; i < 5; i++) CHECK(seen[i][0] == 1 && seen[i][1] == 1);
    uint64_t r1 = 42, r2 = 42;
    tune_config a, a2;
    for (int i = 0; i < 20; i++) {
        tune_config_random(&s, &r1, &a);
        tune_config_random(&s, &r2, &a2);
        CHECK(a.choice[0] == a2.choice[0] && a.choice[1] == a2.choice[1]);
        CHECK(a.choice[0] >= 0 && a.choice[0] < 5 && a.choice[1] >= 0 && a.choice[1] < 2);
    }
    wpk_context_free(ctx);
    CHECK_DONE();
}
