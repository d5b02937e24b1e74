/* onnx_proto.h -- unpacking protobuf messages defensively: every allocation goes through
 * wpk_malloc (so fault injection reaches protobuf-c too), and nesting deeper than
 * ONNX_PROTO_MAX_DEPTH is refused before protobuf-c, which recurses without a limit, sees it. */
#ifndef WPK_ONNX_PROTO_H
#define WPK_ONNX_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "wpk.h"

/* protobuf's own default recursion limit; real models nest a few levels per If/Loop body. */
#define ONNX_PROTO_MAX_DEPTH 100

/* Unpack buf[0..len) (borrowed) as a message of type desc into *out (free with onnx_proto_free).
 * Returns WPK_OK; WPK_ERR_PARSE when the bytes are not such a message, with *why (static text)
 * saying "protobuf parse failed" or that it nests too deeply; WPK_ERR_NOMEM. Records no message:
 * the caller knows what the bytes were meant to be and words it. */
wpk_status onnx_proto_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *buf, size_t len,
                             ProtobufCMessage **out, const char **why);
/* Free a message from onnx_proto_unpack (NULL is a no-op). */
void onnx_proto_free(ProtobufCMessage *msg);

#endif
