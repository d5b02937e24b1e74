/* onnx_proto.c -- protobuf-c unpacking behind a depth guard and Woodpecker's allocator. */
#include "onnx/onnx_proto.h"

#include <stdbool.h>

#include "base/alloc.h"

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

typedef struct tracked_allocator {
    ProtobufCAllocator base;
    bool failed; /* an allocation failed: protobuf-c reports that as a parse failure */
} tracked_allocator;

static void *pb_alloc(void *data, size_t size) {
    void *p = wpk_malloc(size);
    if (!p && data) ((tracked_allocator *)data)->failed = true;
    return p;
}

static void pb_free(void *data, void *p) {
    (void)data;
    wpk_free(p);
}

static ProtobufCAllocator free_allocator = {pb_alloc, pb_free, NULL};

static bool read_varint(const uint8_t *p, size_t len, size_t *pos, uint64_t *v) {
    uint64_t r = 0;
    for (int shift = 0; shift < 64 && *pos < len; shift += 7) {
        uint8_t b = p[(*pos)++];
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false;
}

/* Whether the message in p[0..len) nests message fields at most ONNX_PROTO_MAX_DEPTH deep. Walks
 * the wire format with the generated descriptors, descending only into fields the schema
 * declares as messages; each byte is visited once. Malformed bytes end the walk with `true`:
 * protobuf-c rejects them itself, and only the depth is this function's concern. */
static bool depth_ok(const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t len,
                     int depth) {
    if (depth > ONNX_PROTO_MAX_DEPTH) return false;
    size_t pos = 0;
    while (pos < len) {
        uint64_t key, n;
        if (!read_varint(p, len, &pos, &key)) return true;
        switch (key & 7) {
        case 0:
            if (!read_varint(p, len, &pos, &n)) return true;
            break;
        case 1:
            if (len - pos < 8) return true;
            pos += 8;
            break;
        case 5:
            if (len - pos < 4) return true;
            pos += 4;
            break;
        case 2: {
            if (!read_varint(p, len, &pos, &n) || n > len - pos) return true;
            const ProtobufCFieldDescriptor *f =
                key >> 3 <= UINT32_MAX
                    ? protobuf_c_message_descriptor_get_field(desc, (unsigned)(key >> 3))
                    : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE &&
                !depth_ok(f->descriptor, p + pos, (size_t)n, depth + 1))
                return false;
            pos += (size_t)n;
            break;
        }
        default: /* groups and invalid wire types: protobuf-c refuses them */
            return true;
        }
    }
    return true;
}

wpk_status onnx_proto_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *buf, size_t len,
                             ProtobufCMessage **out, const char **why) {
    *out = NULL;
    *why = "protobuf parse failed";
    if (!depth_ok(desc, buf, len, 0)) {
        *why = "protobuf messages nest deeper than " STRINGIFY(ONNX_PROTO_MAX_DEPTH) " levels";
        return WPK_ERR_PARSE;
    }
    tracked_allocator a = {{pb_alloc, pb_free, NULL}, false};
    a.base.allocator_data = &a;
    *out = protobuf_c_message_unpack(desc, &a.base, len, buf);
    if (*out) return WPK_OK;
    return a.failed ? WPK_ERR_NOMEM : WPK_ERR_PARSE;
}

void onnx_proto_free(ProtobufCMessage *msg) {
    if (msg) protobuf_c_message_free_unpacked(msg, &free_allocator);
}
