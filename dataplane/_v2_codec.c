/* Compiled hot paths of the v2 wire: received messages, receipt handles and sent messages.
 *
 * encode_received: a stored record as the bytes of a v2 ReceiveMessageResponse. The receive path
 * built each message field by field through protobuf's Python API and then serialized it (~14 us a
 * message here, about a tenth of what the broker's loop thread spent per consumed message). This
 * writes the same protobuf fields straight into one bytes object. The rules (which store property
 * becomes which system property, which properties are the user's) are those of
 * dataplane.services.consume.fill_v2_message, which stays the reference: the tests parse both
 * encodings and compare them field by field, for every kind of message.
 *
 * receipt_encode / receipt_decode: ReceiptCodec's version-2 handles (dataplane/receipt.py), issued on
 * every delivery and verified on every ack; anything else is left to the Python code.
 *
 * build_sent: the store messages of a SendMessageRequest, read from its bytes (see its section).
 *
 * ack_checked: the entries of an AckMessageRequest that may all be acked, checked from its bytes.
 *
 * untrack: a list or tuple of plain values taken out of the cyclic garbage collector's walks.
 *
 * Field numbers are apache.rocketmq.v2's (proto/apache/rocketmq/v2/definition.proto):
 *   ReceiveMessageResponse.message = 2
 *   Message: topic = 1, user_properties = 2 (map entries: key = 1, value = 2), system_properties = 3,
 *            body = 4
 *   SystemProperties: tag = 1, keys = 2, message_id = 3, body_digest = 4 (type = 1, checksum = 2),
 *            body_encoding = 5, message_type = 6, born_timestamp = 7, born_host = 8,
 *            store_timestamp = 9, store_host = 10, delivery_timestamp = 11, receipt_handle = 12,
 *            queue_id = 13, queue_offset = 14, invisible_duration = 15, delivery_attempt = 16,
 *            message_group = 17, trace_context = 18, dead_letter_queue = 20 (topic = 1, message_id = 2)
 *   Timestamp and Duration: seconds = 1, nanos = 2
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

/* StoredMessage (dataplane/store/message.py) field positions */
enum { S_QUEUE_ID = 1, S_QUEUE_OFFSET = 2, S_BODY = 4, S_PROPERTIES = 5, S_STORE_TS = 6, S_BORN_TS = 7,
       S_BORN_HOST = 8, S_FIELDS = 16 };

enum { DIGEST_SHA1 = 3, ENCODING_IDENTITY = 1, ENCODING_GZIP = 2, TYPE_NORMAL = 1 };

/* Handed over once by configure(): hashlib.sha1, the hidden property names, the property keys. */
static PyObject *sha1_fn, *hidden_keys;
static PyObject *k_tags, *k_keys, *k_uniq, *k_type, *k_group, *k_born_host, *k_trace, *k_encoding, *k_ns,
    *k_deliver_ms, *k_dlq_topic, *s_gzip, *s_msg_id, *s_copy, *s_update, *s_digest;

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Buf;

static int buf_reserve(Buf *b, Py_ssize_t more)
{
    if (b->len + more <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more)
        cap *= 2;
    char *data = PyMem_Realloc(b->data, cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static int put_raw(Buf *b, const void *data, Py_ssize_t n)
{
    if (buf_reserve(b, n) < 0)
        return -1;
    memcpy(b->data + b->len, data, n);
    b->len += n;
    return 0;
}

static int varint_len(uint64_t v)
{
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static char *write_varint(char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (char)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    *p++ = (char)v;
    return p;
}

static int put_varint(Buf *b, uint64_t v)
{
    if (buf_reserve(b, 10) < 0)
        return -1;
    b->len = write_varint(b->data + b->len, v) - b->data;
    return 0;
}

/* field ``number`` as a varint (int32/int64/enum; negative values are 10 bytes, as protobuf does) */
static int put_int(Buf *b, int number, int64_t v)
{
    if (put_varint(b, (uint64_t)(number << 3)) < 0)
        return -1;
    return put_varint(b, (uint64_t)v);
}

static int put_bytes(Buf *b, int number, const char *data, Py_ssize_t n)
{
    if (put_varint(b, (uint64_t)((number << 3) | 2)) < 0 || put_varint(b, (uint64_t)n) < 0)
        return -1;
    return put_raw(b, data, n);
}

static int put_str(Buf *b, int number, PyObject *text)
{
    Py_ssize_t n;
    const char *data = PyUnicode_AsUTF8AndSize(text, &n);
    if (data == NULL)
        return -1;
    return put_bytes(b, number, data, n);
}

/* Timestamp / Duration from milliseconds: floor division, as the Python builder computes it */
static int put_millis(Buf *b, int number, int64_t ms)
{
    int64_t seconds = ms / 1000, rem = ms % 1000;
    if (rem < 0) {
        rem += 1000;
        seconds -= 1;
    }
    int64_t nanos = rem * 1000000;
    int inner = (seconds ? 1 + varint_len((uint64_t)seconds) : 0) + (nanos ? 1 + varint_len((uint64_t)nanos) : 0);
    if (put_varint(b, (uint64_t)((number << 3) | 2)) < 0 || put_varint(b, (uint64_t)inner) < 0)
        return -1;
    if (seconds && put_int(b, 1, seconds) < 0)
        return -1;
    if (nanos && put_int(b, 2, nanos) < 0)
        return -1;
    return 0;
}

static int64_t as_int64(PyObject *o, int *failed)
{
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred())
        *failed = 1;
    return (int64_t)v;
}

static PyObject *get(PyObject *props, PyObject *key)
{
    return PyDict_GetItemWithError(props, key); /* borrowed; NULL with no error when absent */
}

/* The body's SHA-1 as upper-case hex, through hashlib (consume.py says why SHA-1) */
static int put_sha1(Buf *b, PyObject *body)
{
    PyObject *h = PyObject_CallOneArg(sha1_fn, body);
    if (h == NULL)
        return -1;
    PyObject *digest = PyObject_CallMethodNoArgs(h, s_digest);
    Py_DECREF(h);
    if (digest == NULL)
        return -1;
    if (!PyBytes_Check(digest) || PyBytes_GET_SIZE(digest) != 20) {
        Py_DECREF(digest);
        PyErr_SetString(PyExc_ValueError, "sha1 digest is not 20 bytes");
        return -1;
    }
    static const char hex[] = "0123456789ABCDEF";
    char out[2 + 2 + 40]; /* Digest: type field (2 bytes), checksum tag and length, 40 digits */
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(digest);
    out[0] = (char)(1 << 3);
    out[1] = DIGEST_SHA1;
    out[2] = (char)((2 << 3) | 2);
    out[3] = 40;
    for (int i = 0; i < 20; i++) {
        out[4 + 2 * i] = hex[d[i] >> 4];
        out[5 + 2 * i] = hex[d[i] & 15];
    }
    Py_DECREF(digest);
    return put_bytes(b, 4, out, 44);
}

static int is_hidden(PyObject *key)
{
    if (PyUnicode_GET_LENGTH(key) >= 2 && PyUnicode_READ_CHAR(key, 0) == '_' && PyUnicode_READ_CHAR(key, 1) == '_')
        return 1;
    return PySet_Contains(hidden_keys, key);
}

/* The system properties of ``stored`` into ``sp``; the user properties (map entries) into ``up``. */
static int encode_properties(Buf *sp, Buf *up, PyObject *stored, PyObject *props, PyObject *store_host,
                             PyObject *handle, PyObject *attempt, PyObject *invisible_ms)
{
    int failed = 0;
    PyObject *v;
    if ((v = get(props, k_tags)) != NULL) {
        if (put_str(sp, 1, v) < 0)
            return -1;
    } else if (PyErr_Occurred())
        return -1;
    if ((v = get(props, k_keys)) != NULL && PyUnicode_GET_LENGTH(v) > 0) {
        PyObject *keys = PyUnicode_Split(v, NULL, -1); /* str.split(): the same whitespace rules */
        if (keys == NULL)
            return -1;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys); i++) {
            if (put_str(sp, 2, PyList_GET_ITEM(keys, i)) < 0) {
                Py_DECREF(keys);
                return -1;
            }
        }
        Py_DECREF(keys);
    } else if (PyErr_Occurred())
        return -1;
    PyObject *message_id = get(props, k_uniq);
    if (message_id != NULL && PyUnicode_GET_LENGTH(message_id) > 0) {
        Py_INCREF(message_id);
    } else {
        if (PyErr_Occurred())
            return -1;
        message_id = PyObject_GetAttr(stored, s_msg_id); /* the offset message id */
        if (message_id == NULL)
            return -1;
    }
    if (PyUnicode_GET_LENGTH(message_id) > 0 && put_str(sp, 3, message_id) < 0)
        goto fail;
    if (put_sha1(sp, PyTuple_GET_ITEM(stored, S_BODY)) < 0)
        goto fail;
    v = get(props, k_encoding);
    if (v == NULL && PyErr_Occurred())
        goto fail;
    int gzip = 0;
    if (v != NULL) {
        gzip = PyUnicode_Compare(v, s_gzip) == 0;
        if (PyErr_Occurred())
            goto fail;
    }
    if (put_int(sp, 5, gzip ? ENCODING_GZIP : ENCODING_IDENTITY) < 0)
        goto fail;
    int64_t mtype = TYPE_NORMAL;
    if ((v = get(props, k_type)) != NULL) {
        PyObject *number = PyLong_FromUnicodeObject(v, 10); /* int(text), ValueError as in Python */
        if (number == NULL)
            goto fail;
        mtype = as_int64(number, &failed);
        Py_DECREF(number);
        if (failed)
            goto fail;
    } else if (PyErr_Occurred())
        goto fail;
    if (mtype && put_int(sp, 6, mtype) < 0)
        goto fail;
    int64_t born_ms = as_int64(PyTuple_GET_ITEM(stored, S_BORN_TS), &failed);
    if (failed || put_millis(sp, 7, born_ms) < 0)
        goto fail;
    v = get(props, k_born_host);
    if (v == NULL || PyUnicode_GET_LENGTH(v) == 0) {
        if (PyErr_Occurred())
            goto fail;
        PyObject *host = PyTuple_GET_ITEM(stored, S_BORN_HOST);
        if (!PyTuple_Check(host) || PyTuple_GET_SIZE(host) < 1) {
            PyErr_SetString(PyExc_TypeError, "born_host must be a (host, port) tuple");
            goto fail;
        }
        v = PyTuple_GET_ITEM(host, 0);
    }
    if (PyUnicode_GET_LENGTH(v) > 0 && put_str(sp, 8, v) < 0)
        goto fail;
    int64_t store_ms = as_int64(PyTuple_GET_ITEM(stored, S_STORE_TS), &failed);
    if (failed || put_millis(sp, 9, store_ms) < 0)
        goto fail;
    if (PyUnicode_GET_LENGTH(store_host) > 0 && put_str(sp, 10, store_host) < 0)
        goto fail;
    if ((v = get(props, k_deliver_ms)) != NULL) {
        /* str.isdigit() then int(): other text (never written by the timer wheel) is left out */
        PyObject *digits = PyObject_CallMethod(v, "isdigit", NULL);
        if (digits == NULL)
            goto fail;
        int ok = digits == Py_True;
        Py_DECREF(digits);
        if (ok) {
            PyObject *number = PyLong_FromUnicodeObject(v, 10);
            if (number == NULL)
                goto fail;
            int64_t deliver_ms = as_int64(number, &failed);
            Py_DECREF(number);
            if (failed || put_millis(sp, 11, deliver_ms) < 0)
                goto fail;
        }
    } else if (PyErr_Occurred())
        goto fail;
    if (handle != Py_None && put_str(sp, 12, handle) < 0)
        goto fail;
    int64_t queue_id = as_int64(PyTuple_GET_ITEM(stored, S_QUEUE_ID), &failed);
    int64_t queue_offset = as_int64(PyTuple_GET_ITEM(stored, S_QUEUE_OFFSET), &failed);
    if (failed || (queue_id && put_int(sp, 13, (int32_t)queue_id) < 0) || put_int(sp, 14, queue_offset) < 0)
        goto fail;
    if (invisible_ms != Py_None) {
        int64_t ms = as_int64(invisible_ms, &failed);
        if (failed || put_millis(sp, 15, ms) < 0)
            goto fail;
    }
    if (attempt != Py_None) {
        int64_t n = as_int64(attempt, &failed);
        if (failed || put_int(sp, 16, (int32_t)n) < 0)
            goto fail;
    }
    if ((v = get(props, k_group)) != NULL) {
        if (put_str(sp, 17, v) < 0)
            goto fail;
    } else if (PyErr_Occurred())
        goto fail;
    if ((v = get(props, k_trace)) != NULL) {
        if (put_str(sp, 18, v) < 0)
            goto fail;
    } else if (PyErr_Occurred())
        goto fail;
    if ((v = get(props, k_dlq_topic)) != NULL) {
        Buf dlq = {0};
        int bad = (PyUnicode_GET_LENGTH(v) > 0 && put_str(&dlq, 1, v) < 0) ||
                  (PyUnicode_GET_LENGTH(message_id) > 0 && put_str(&dlq, 2, message_id) < 0) ||
                  put_bytes(sp, 20, dlq.data ? dlq.data : "", dlq.len) < 0;
        PyMem_Free(dlq.data);
        if (bad)
            goto fail;
    } else if (PyErr_Occurred())
        goto fail;
    Py_DECREF(message_id);

    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(props, &pos, &key, &value)) {
        if (!PyUnicode_Check(key) || !PyUnicode_Check(value)) {
            PyErr_SetString(PyExc_TypeError, "message properties must be str -> str");
            return -1;
        }
        int hidden = is_hidden(key);
        if (hidden < 0)
            return -1;
        if (hidden)
            continue;
        Py_ssize_t klen, vlen;
        const char *k = PyUnicode_AsUTF8AndSize(key, &klen);
        const char *val = PyUnicode_AsUTF8AndSize(value, &vlen);
        if (k == NULL || val == NULL)
            return -1;
        /* a map entry carries its key and its value even when empty, as protobuf writes them */
        Py_ssize_t entry = 2 + varint_len((uint64_t)klen) + klen + varint_len((uint64_t)vlen) + vlen;
        if (put_varint(up, (2 << 3) | 2) < 0 || put_varint(up, (uint64_t)entry) < 0 ||
            put_bytes(up, 1, k, klen) < 0 || put_bytes(up, 2, val, vlen) < 0)
            return -1;
    }
    return 0;
fail:
    Py_DECREF(message_id);
    return -1;
}

/* encode_received(stored, topic, store_host, receipt_handle, attempt, invisible_ms) -> bytes */
static PyObject *encode_received(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (sha1_fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_v2_codec.configure() was not called");
        return NULL;
    }
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "encode_received(stored, topic, store_host, receipt_handle, attempt, invisible_ms)");
        return NULL;
    }
    PyObject *stored = args[0], *topic = args[1], *store_host = args[2];
    if (!PyTuple_Check(stored) || PyTuple_GET_SIZE(stored) < S_FIELDS || !PyBytes_Check(topic) ||
        !PyUnicode_Check(store_host) || (args[3] != Py_None && !PyUnicode_Check(args[3]))) {
        PyErr_SetString(PyExc_TypeError, "encode_received: a StoredMessage, the topic Resource's bytes, "
                                         "the store host and a receipt handle (str or None)");
        return NULL;
    }
    PyObject *body = PyTuple_GET_ITEM(stored, S_BODY), *props = PyTuple_GET_ITEM(stored, S_PROPERTIES);
    if (!PyBytes_Check(body) || !PyDict_Check(props)) {
        PyErr_SetString(PyExc_TypeError, "encode_received: the body must be bytes, the properties a dict");
        return NULL;
    }
    Buf sp = {0}, up = {0};
    PyObject *out = NULL;
    if (encode_properties(&sp, &up, stored, props, store_host, args[3], args[4], args[5]) < 0)
        goto done;
    Py_ssize_t topic_len = PyBytes_GET_SIZE(topic), body_len = PyBytes_GET_SIZE(body);
    Py_ssize_t message_len = 1 + varint_len((uint64_t)topic_len) + topic_len + up.len + 1 +
                             varint_len((uint64_t)sp.len) + sp.len +
                             (body_len ? 1 + varint_len((uint64_t)body_len) + body_len : 0);
    out = PyBytes_FromStringAndSize(NULL, 1 + varint_len((uint64_t)message_len) + message_len);
    if (out == NULL)
        goto done;
    char *p = PyBytes_AS_STRING(out);
    *p++ = (char)((2 << 3) | 2); /* ReceiveMessageResponse.message */
    p = write_varint(p, (uint64_t)message_len);
    *p++ = (char)((1 << 3) | 2); /* Message.topic */
    p = write_varint(p, (uint64_t)topic_len);
    memcpy(p, PyBytes_AS_STRING(topic), topic_len);
    p += topic_len;
    if (up.len) {
        memcpy(p, up.data, up.len);
        p += up.len;
    }
    *p++ = (char)((3 << 3) | 2); /* Message.system_properties */
    p = write_varint(p, (uint64_t)sp.len);
    if (sp.len) {
        memcpy(p, sp.data, sp.len);
        p += sp.len;
    }
    if (body_len) {
        *p++ = (char)((4 << 3) | 2); /* Message.body */
        p = write_varint(p, (uint64_t)body_len);
        memcpy(p, PyBytes_AS_STRING(body), body_len);
    }
done:
    PyMem_Free(sp.data);
    PyMem_Free(up.data);
    return out;
}

/* Receipt handles (dataplane/receipt.py has the layout): base64url(payload) "." base64url(tag), the
 * payload "2|queue id|offset|nonce|invisible until|group|topic" and the tag its keyed BLAKE2b, through
 * the codec's hashlib object (copied per use, as the Python code does). */

static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
#define MAX_HANDLE 2048
#define TAG_SIZE 16

static Py_ssize_t b64_len(Py_ssize_t n) { return n / 3 * 4 + (n % 3 ? n % 3 + 1 : 0); }

static Py_UCS1 *b64_write(Py_UCS1 *out, const unsigned char *in, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        *out++ = B64URL[v >> 18];
        *out++ = B64URL[(v >> 12) & 63];
        *out++ = B64URL[(v >> 6) & 63];
        *out++ = B64URL[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        *out++ = B64URL[v >> 18];
        *out++ = B64URL[(v >> 12) & 63];
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
        *out++ = B64URL[v >> 18];
        *out++ = B64URL[(v >> 12) & 63];
        *out++ = B64URL[(v >> 6) & 63];
    }
    return out;
}

static int b64_digit(Py_UCS1 c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '-' ? 62 : c == '_' ? 63 : -1;
}

/* Strict base64url without padding into ``out``; the decoded length, or -1 (left to Python's path) */
static Py_ssize_t b64_read(const Py_UCS1 *in, Py_ssize_t n, unsigned char *out)
{
    if (n % 4 == 1)
        return -1;
    Py_ssize_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int d = b64_digit(in[i]);
        if (d < 0)
            return -1;
        acc = acc << 6 | (uint32_t)d;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    return o; /* leftover bits ignored, as binascii does */
}

/* The keyed BLAKE2b tag of ``payload``: mac.copy(), update, digest */
static PyObject *tag_of(PyObject *mac, const char *payload, Py_ssize_t n)
{
    PyObject *m = PyObject_CallMethodNoArgs(mac, s_copy);
    if (m == NULL)
        return NULL;
    PyObject *data = PyBytes_FromStringAndSize(payload, n);
    PyObject *done = data ? PyObject_CallMethodOneArg(m, s_update, data) : NULL;
    Py_XDECREF(data);
    PyObject *tag = done ? PyObject_CallMethodNoArgs(m, s_digest) : NULL;
    Py_XDECREF(done);
    Py_DECREF(m);
    if (tag != NULL && (!PyBytes_Check(tag) || PyBytes_GET_SIZE(tag) != TAG_SIZE)) {
        Py_DECREF(tag);
        PyErr_SetString(PyExc_ValueError, "the receipt MAC must give 16 bytes");
        return NULL;
    }
    return tag;
}

/* receipt_encode(mac, group, topic, queue_id, offset, nonce, until) -> str (ReceiptCodec.encode_parts) */
static PyObject *receipt_encode(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7 || !PyUnicode_Check(args[1]) || !PyUnicode_Check(args[2]) || !PyUnicode_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "receipt_encode(mac, group, topic, queue_id, offset, nonce, until)");
        return NULL;
    }
    long long qid = PyLong_AsLongLong(args[3]), offset = PyLong_AsLongLong(args[4]),
              until = PyLong_AsLongLong(args[6]);
    if (PyErr_Occurred())
        return NULL;
    Py_ssize_t glen, tlen, nlen;
    const char *group = PyUnicode_AsUTF8AndSize(args[1], &glen);
    const char *topic = group ? PyUnicode_AsUTF8AndSize(args[2], &tlen) : NULL;
    const char *nonce = topic ? PyUnicode_AsUTF8AndSize(args[5], &nlen) : NULL;
    if (nonce == NULL)
        return NULL;
    Py_ssize_t cap = 2 + 3 * 21 + 4 + glen + tlen + nlen;
    char small[512];
    char *payload = cap <= (Py_ssize_t)sizeof(small) ? small : PyMem_Malloc(cap);
    if (payload == NULL)
        return PyErr_NoMemory();
    int head = snprintf(payload, 2 + 3 * 21 + 4, "2|%lld|%lld|", qid, offset);
    Py_ssize_t n = head;
    memcpy(payload + n, nonce, nlen);
    n += nlen;
    n += snprintf(payload + n, 24, "|%lld|", until);
    memcpy(payload + n, group, glen);
    n += glen;
    payload[n++] = '|';
    memcpy(payload + n, topic, tlen);
    n += tlen;
    PyObject *out = NULL, *tag = tag_of(args[0], payload, n);
    if (tag != NULL) {
        out = PyUnicode_New(b64_len(n) + 1 + b64_len(TAG_SIZE), 127);
        if (out != NULL) {
            Py_UCS1 *p = b64_write(PyUnicode_1BYTE_DATA(out), (const unsigned char *)payload, n);
            *p++ = '.';
            b64_write(p, (const unsigned char *)PyBytes_AS_STRING(tag), TAG_SIZE);
        }
        Py_DECREF(tag);
    }
    if (payload != small)
        PyMem_Free(payload);
    return out;
}

/* A canonical decimal integer (what receipt_encode writes) in [s, e); 0 when it is anything else */
static int parse_int(const char *s, const char *e, long long *out)
{
    int negative = s < e && *s == '-';
    s += negative;
    if (s == e || e - s > 19 || (*s == '0' && e - s > 1))
        return 0;
    unsigned long long v = 0;
    for (; s < e; s++) {
        if (*s < '0' || *s > '9')
            return 0;
        v = v * 10 + (unsigned long long)(*s - '0'); /* 19 digits fit in 64 unsigned bits */
    }
    if (v > (unsigned long long)LLONG_MAX + negative)
        return 0;
    *out = negative ? (long long)(0 - v) : (long long)v;
    return 1;
}

/* The fields of a version-2 handle: spans into the decoded payload the caller owns */
typedef struct {
    long long qid, offset, until;
    const char *group, *topic, *nonce;
    Py_ssize_t group_n, topic_n, nonce_n;
} HandleParts;

/* Verify and split the handle ``chars[0:len]`` (ASCII) into ``out``, its payload decoded into
 * ``payload`` (MAX_HANDLE bytes): 1 when it is a well-formed, correctly tagged version-2 handle, 0
 * when it is anything else (left to the Python code), -1 with an exception set. */
static int handle_parts(PyObject *mac, const Py_UCS1 *chars, Py_ssize_t len, unsigned char *payload, HandleParts *out)
{
    if (len == 0 || len > MAX_HANDLE)
        return 0;
    const Py_UCS1 *dot = memchr(chars, '.', len);
    if (dot == NULL || memchr(dot + 1, '.', len - (dot - chars) - 1) != NULL)
        return 0;
    unsigned char sig[MAX_HANDLE];
    Py_ssize_t n = b64_read(chars, dot - chars, payload);
    Py_ssize_t sig_len = n < 0 ? -1 : b64_read(dot + 1, len - (dot - chars) - 1, sig);
    if (sig_len != TAG_SIZE || n < 2 || payload[0] != '2' || payload[1] != '|')
        return 0;
    PyObject *tag = tag_of(mac, (const char *)payload, n);
    if (tag == NULL)
        return -1;
    const unsigned char *expected = (const unsigned char *)PyBytes_AS_STRING(tag);
    unsigned char diff = 0;
    for (int i = 0; i < TAG_SIZE; i++) /* every byte compared: no early exit on a mismatch */
        diff |= (unsigned char)(expected[i] ^ sig[i]);
    Py_DECREF(tag);
    if (diff)
        return 0;
    const char *p = (const char *)payload, *end = p + n, *field[7];
    Py_ssize_t size[7];
    for (int i = 0; i < 7; i++) { /* split("|", 6): the topic is the rest */
        const char *bar = i < 6 ? memchr(p, '|', end - p) : end;
        if (bar == NULL)
            return 0;
        field[i] = p;
        size[i] = bar - p;
        p = bar + (i < 6);
    }
    if (!parse_int(field[1], field[1] + size[1], &out->qid) || !parse_int(field[2], field[2] + size[2], &out->offset) ||
        !parse_int(field[4], field[4] + size[4], &out->until))
        return 0;
    out->nonce = field[3];
    out->nonce_n = size[3];
    out->group = field[5];
    out->group_n = size[5];
    out->topic = field[6];
    out->topic_n = size[6];
    return 1;
}

/* receipt_decode(mac, text, handle_type) -> handle_type(group, topic, queue_id, offset, nonce, until)
 * for a well-formed, correctly tagged version-2 handle; None for anything else, which
 * ReceiptCodec.decode then takes apart in Python (v1 handles, and the precise error to answer). */
static PyObject *receipt_decode(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyType_Check(args[2]) || !PyType_IsSubtype((PyTypeObject *)args[2], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "receipt_decode(mac, text, handle_type)");
        return NULL;
    }
    PyObject *text = args[1];
    if (!PyUnicode_Check(text) || PyUnicode_KIND(text) != PyUnicode_1BYTE_KIND || !PyUnicode_IS_ASCII(text))
        Py_RETURN_NONE;
    unsigned char payload[MAX_HANDLE];
    HandleParts h;
    int found = handle_parts(args[0], PyUnicode_1BYTE_DATA(text), PyUnicode_GET_LENGTH(text), payload, &h);
    if (found < 0)
        return NULL;
    if (!found)
        Py_RETURN_NONE;
    PyObject *group = PyUnicode_DecodeUTF8(h.group, h.group_n, "strict");
    PyObject *topic = group ? PyUnicode_DecodeUTF8(h.topic, h.topic_n, "strict") : NULL;
    PyObject *nonce = topic ? PyUnicode_DecodeUTF8(h.nonce, h.nonce_n, "strict") : NULL;
    if (nonce == NULL) {
        Py_XDECREF(group);
        Py_XDECREF(topic);
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            return NULL;
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyTypeObject *type = (PyTypeObject *)args[2];
    PyObject *handle = type->tp_alloc(type, 6);
    PyObject *q = PyLong_FromLongLong(h.qid), *o = PyLong_FromLongLong(h.offset), *u = PyLong_FromLongLong(h.until);
    if (handle == NULL || q == NULL || o == NULL || u == NULL) {
        Py_XDECREF(handle);
        Py_XDECREF(q);
        Py_XDECREF(o);
        Py_XDECREF(u);
        Py_DECREF(group);
        Py_DECREF(topic);
        Py_DECREF(nonce);
        return NULL;
    }
    PyTuple_SET_ITEM(handle, 0, group);
    PyTuple_SET_ITEM(handle, 1, topic);
    PyTuple_SET_ITEM(handle, 2, q);
    PyTuple_SET_ITEM(handle, 3, o);
    PyTuple_SET_ITEM(handle, 4, nonce);
    PyTuple_SET_ITEM(handle, 5, u);
    return handle;
}

/* the store property names of the system properties, from the Python builder's constants */
static PyObject *configure_names(PyObject *names)
{
    static const char *wanted[] = {"tags", "keys", "uniq", "type", "group", "born_host", "trace",
                                   "encoding", "ns", "deliver_ms", "dlq_topic"};
    PyObject **slots[] = {&k_tags, &k_keys, &k_uniq, &k_type, &k_group, &k_born_host, &k_trace,
                          &k_encoding, &k_ns, &k_deliver_ms, &k_dlq_topic};
    for (size_t i = 0; i < sizeof(wanted) / sizeof(wanted[0]); i++) {
        PyObject *value = PyDict_GetItemString(names, wanted[i]);
        if (value == NULL || !PyUnicode_Check(value)) {
            PyErr_Format(PyExc_KeyError, "configure: names[%s] must be a str", wanted[i]);
            return NULL;
        }
        Py_INCREF(value);
        Py_XSETREF(*slots[i], value);
    }
    Py_RETURN_NONE;
}

/* ---- SendMessageRequest -> MessageToStore (build_sent) -------------------------------------------
 *
 * produce.build_message validates a v2 Message and turns it into a MessageToStore through protobuf's
 * Python API, about half of what a batched SendMessage cost the loop thread per message. build_sent
 * reads the serialized request instead, for the usual request: every message NORMAL or FIFO, on the
 * one topic of the first message, and valid. It applies build_message's rules and returns None for
 * anything else (another topic, DELAY or TRANSACTION, a delivery time, any rule broken, text that
 * needs cutting), which the Python code then builds or refuses with the message that says why.
 *
 *   SendMessageRequest.messages = 1; Message and SystemProperties as above.
 */

static PyObject *send_cls, *reserved_keys, *s_type_normal, *s_type_fifo, *s_space;

/* MessageToStore is a dataclass with __slots__: calling it runs its Python-level __init__ (about
 * 0.8 us, 50 us of a 64-message request). Its fields are slots at fixed offsets of the object, so
 * they are filled here directly, in the order below, once configure_send has checked that the class
 * is what this expects (these fields and no others, each a plain object slot, no __post_init__);
 * otherwise the class is called. The differential tests compare the result with build_message's. */
enum { F_TOPIC, F_QUEUE_ID, F_BODY, F_PROPERTIES, F_FLAG, F_SYS_FLAG, F_BORN_TS, F_BORN_HOST,
       F_RECONSUME, F_PREPARED, F_COUNT };
static const char *const send_fields[F_COUNT] = {
    "topic", "queue_id", "body", "properties", "flag", "sys_flag", "born_timestamp", "born_host",
    "reconsume_times", "prepared_transaction_offset"};
static Py_ssize_t send_offsets[F_COUNT];
static int send_slots; /* 1 when send_offsets may be used */

/* send_offsets from cls; 1 when every field is a plain object slot and nothing else runs in __init__ */
static int find_send_slots(PyObject *cls)
{
    if (!PyType_Check(cls) || PyObject_HasAttrString(cls, "__post_init__"))
        return 0;
    PyObject *fields = PyObject_GetAttrString(cls, "__dataclass_fields__");
    if (fields == NULL) {
        PyErr_Clear();
        return 0;
    }
    Py_ssize_t n = PyDict_Check(fields) ? PyDict_GET_SIZE(fields) : -1;
    Py_DECREF(fields);
    if (n != F_COUNT)
        return 0;
    for (int i = 0; i < F_COUNT; i++) {
        PyObject *d = PyObject_GetAttrString(cls, send_fields[i]);
        if (d == NULL) {
            PyErr_Clear();
            return 0;
        }
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type) &&
                 ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX &&
                 !(((PyMemberDescrObject *)d)->d_member->flags & READONLY);
        if (ok)
            send_offsets[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
        if (!ok)
            return 0;
    }
    return 1;
}

/* A MessageToStore of these fields (reconsume_times and prepared_transaction_offset 0), new reference */
static PyObject *new_stored(PyObject *topic, PyObject *queue_id, PyObject *body, PyObject *props,
                            PyObject *born_ts, PyObject *born_host, PyObject *zero)
{
    if (!send_slots) {
        PyObject *args[] = {topic, queue_id, body, props, zero, zero, born_ts, born_host};
        return PyObject_Vectorcall(send_cls, args, 8, NULL);
    }
    PyTypeObject *type = (PyTypeObject *)send_cls;
    PyObject *obj = type->tp_alloc(type, 0);
    if (obj == NULL)
        return NULL;
    PyObject *values[F_COUNT] = {topic, queue_id, body, props, zero, zero, born_ts, born_host, zero, zero};
    for (int i = 0; i < F_COUNT; i++)
        *(PyObject **)((char *)obj + send_offsets[i]) = Py_NewRef(values[i]);
    return obj;
}

typedef struct {
    const char *p;
    Py_ssize_t n;
} Span;

/* one protobuf field: number, wire type, and its varint value or its bytes */
typedef struct {
    uint32_t number;
    int wire;
    uint64_t value;
    Span bytes;
} Field;

static int read_varint(const char **pp, const char *end, uint64_t *out)
{
    const char *p = *pp;
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (p >= end)
            return -1;
        unsigned char c = (unsigned char)*p++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *pp = p;
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* the next field of [*pp, end); -1 when malformed or of a wire type these messages do not use */
static int next_field(const char **pp, const char *end, Field *f)
{
    uint64_t key;
    if (read_varint(pp, end, &key) < 0 || key >> 32)
        return -1;
    f->number = (uint32_t)(key >> 3);
    f->wire = (int)(key & 7);
    switch (f->wire) {
    case 0:
        return read_varint(pp, end, &f->value);
    case 1:
        if (end - *pp < 8)
            return -1;
        *pp += 8;
        return 0;
    case 2: {
        uint64_t n;
        if (read_varint(pp, end, &n) < 0 || n > (uint64_t)(end - *pp))
            return -1;
        f->bytes.p = *pp;
        f->bytes.n = (Py_ssize_t)n;
        *pp += n;
        return 0;
    }
    case 5:
        if (end - *pp < 4)
            return -1;
        *pp += 4;
        return 0;
    default:
        return -1;
    }
}

static int has_forbidden(Span s)
{
    return memchr(s.p, 0, s.n) || memchr(s.p, 1, s.n) || memchr(s.p, 2, s.n);
}

static int has_byte(Span s, char c) { return memchr(s.p, c, s.n) != NULL; }

static int is_ascii(Span s)
{
    for (Py_ssize_t i = 0; i < s.n; i++)
        if ((unsigned char)s.p[i] & 0x80)
            return 0;
    return 1;
}

/* str.isspace() of an ASCII character */
static int ascii_space(unsigned char c) { return c == ' ' || (c >= 9 && c <= 13) || (c >= 28 && c <= 31); }

/* the text of s, or NULL (an exception set) when it is not UTF-8 */
static PyObject *text_of(Span s) { return PyUnicode_DecodeUTF8(s.p, s.n, NULL); }

/* produce._check_text: 1..limit characters, none of \0 \1 \2, no surrounding whitespace.
 * Returns the text (new reference) or NULL: exception set, or not set when the rule is broken. */
static PyObject *checked_text(Span s, Py_ssize_t limit)
{
    if (s.n == 0 || has_forbidden(s))
        return NULL;
    if (is_ascii(s)) {
        if (s.n > limit || ascii_space((unsigned char)s.p[0]) || ascii_space((unsigned char)s.p[s.n - 1]))
            return NULL;
        return PyUnicode_DecodeASCII(s.p, s.n, NULL);
    }
    PyObject *t = text_of(s);
    if (t == NULL)
        return NULL;
    Py_ssize_t len = PyUnicode_GET_LENGTH(t);
    if (len > limit || Py_UNICODE_ISSPACE(PyUnicode_READ_CHAR(t, 0)) ||
        Py_UNICODE_ISSPACE(PyUnicode_READ_CHAR(t, len - 1))) {
        Py_DECREF(t);
        return NULL;
    }
    return t;
}

/* text of at most limit characters without \0 \1 \2 (property values, message ids), or NULL */
static PyObject *bounded_text(Span s, Py_ssize_t limit)
{
    if (has_forbidden(s))
        return NULL;
    PyObject *t = text_of(s);
    if (t != NULL && PyUnicode_GET_LENGTH(t) > limit)
        Py_CLEAR(t);
    return t;
}

/* the settings of one build_sent call */
typedef struct {
    Span want_ns, want_name;
    PyObject *ns, *qualified, *peer;
    Py_ssize_t limit, max_properties, max_tag, max_keys;
    long long queue_count;
    int accept_normal, accept_fifo;
    long long next_rr; /* the topic's round-robin position, written back when used */
    int used_rr;
} SendRules;

static int span_eq(Span a, Span b) { return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0); }

/* Resource: resource_namespace = 1, name = 2 */
static int resource_of(Span r, Span *ns, Span *name)
{
    const char *p = r.p, *end = r.p + r.n;
    Field f;
    while (p < end) {
        if (next_field(&p, end, &f) < 0)
            return -1;
        if (f.wire == 2 && f.number == 1)
            *ns = f.bytes;
        else if (f.wire == 2 && f.number == 2)
            *name = f.bytes;
    }
    return 0;
}

/* a user_properties map entry (key = 1, value = 2) into props, under build_message's rules */
static int add_user_property(PyObject *props, Span entry)
{
    const char *p = entry.p, *end = entry.p + entry.n;
    Span key = {"", 0}, value = {"", 0};
    Field f;
    while (p < end) {
        if (next_field(&p, end, &f) < 0)
            return -1;
        if (f.wire == 2 && f.number == 1)
            key = f.bytes;
        else if (f.wire == 2 && f.number == 2)
            value = f.bytes;
    }
    if (key.n >= 5 && memcmp(key.p, "__MQ_", 5) == 0)
        return -1;
    PyObject *k = checked_text(key, 256);
    if (k == NULL)
        return -1;
    PyObject *v = PySet_Contains(reserved_keys, k) ? NULL : bounded_text(value, 16384);
    int rc = v == NULL ? -1 : PyDict_SetItem(props, k, v);
    Py_DECREF(k);
    Py_XDECREF(v);
    return rc;
}

/* Timestamp (seconds = 1, nanos = 2) -> milliseconds as build_message computes them */
static int timestamp_ms(Span ts, int64_t *out)
{
    const char *p = ts.p, *end = ts.p + ts.n;
    int64_t seconds = 0, nanos = 0;
    Field f;
    while (p < end) {
        if (next_field(&p, end, &f) < 0)
            return -1;
        if (f.wire == 0 && f.number == 1)
            seconds = (int64_t)f.value;
        else if (f.wire == 0 && f.number == 2)
            nanos = (int32_t)(uint32_t)f.value;
    }
    if (seconds > 9000000000000LL || seconds < -9000000000000LL)
        return -1; /* past what int64 milliseconds hold: the Python code decides */
    int64_t ms = nanos / 1000000;
    if (nanos % 1000000 < 0)
        ms -= 1; /* floor division, as Python's // */
    *out = seconds * 1000 + ms;
    return 0;
}

/* props[key] = text (a new reference, consumed); -1 when text is NULL or on failure */
static int set_text(PyObject *props, PyObject *key, PyObject *text)
{
    if (text == NULL)
        return -1;
    int rc = PyDict_SetItem(props, key, text);
    Py_DECREF(text);
    return rc;
}

/* The system properties of one message into props (after the user's, the reference's order);
 * fills *fifo, *born_ms and *queue_id. -1 when the message is not for this path. */
static int add_system_properties(Span sys, SendRules *r, PyObject *props, PyObject **id, int *fifo,
                                 int64_t *born_ms, long long *queue_id)
{
    Span tag = {"", 0}, message_id = {"", 0}, born_host = {"", 0}, group = {"", 0}, trace = {"", 0};
    Span born = {"", 0};
    int has_tag = 0, has_group = 0, has_trace = 0, has_delivery = 0, has_born = 0;
    uint64_t encoding = 0, mtype = 0, qid = 0;
    const char *p = sys.p, *end = sys.p + sys.n;
    Field f;
    PyObject *keys = PyList_New(0);
    if (keys == NULL)
        return -1;
    while (p < end) {
        if (next_field(&p, end, &f) < 0)
            goto fail;
        int text = f.wire == 2, number = f.wire == 0;
        switch (f.number) {
        case 1: if (text) { tag = f.bytes; has_tag = 1; } break;
        case 2:
            if (text) {
                PyObject *k = checked_text(f.bytes, 128);
                int bad = k == NULL || has_byte(f.bytes, ' ') || PyList_Append(keys, k) < 0;
                Py_XDECREF(k);
                if (bad)
                    goto fail;
            }
            break;
        case 3: if (text) message_id = f.bytes; break;
        case 5: if (number) encoding = f.value; break;
        case 6: if (number) mtype = f.value; break;
        case 7: if (text) { if (has_born++) goto fail; born = f.bytes; } break;
        case 8: if (text) born_host = f.bytes; break;
        case 11: has_delivery = 1; break;
        case 13: if (number) qid = f.value; break;
        case 17: if (text) { group = f.bytes; has_group = 1; } break;
        case 18: if (text) { trace = f.bytes; has_trace = 1; } break;
        default: break;
        }
    }
    /* the message type as build_message infers it; DELAY, TRANSACTION and the rest go to Python */
    if (has_delivery)
        goto fail;
    if (mtype == 0)
        *fifo = has_group;
    else if (mtype == 1 || mtype == 2)
        *fifo = mtype == 2;
    else
        goto fail;
    if (!(*fifo ? r->accept_fifo : r->accept_normal) || (*fifo && group.n == 0) || (!*fifo && has_group))
        goto fail;
    if (message_id.n == 0 || (*id = bounded_text(message_id, 128)) == NULL)
        goto fail;
    if (has_tag) {
        if (has_byte(tag, '|') || has_byte(tag, ' ') || (tag.n == 1 && tag.p[0] == '*'))
            goto fail;
        if (set_text(props, k_tags, checked_text(tag, r->max_tag)) < 0)
            goto fail;
    }
    Py_ssize_t nkeys = PyList_GET_SIZE(keys);
    if (nkeys > r->max_keys || (nkeys && set_text(props, k_keys, PyUnicode_Join(s_space, keys)) < 0))
        goto fail;
    if (PyDict_SetItem(props, k_uniq, *id) < 0 ||
        PyDict_SetItem(props, k_type, *fifo ? s_type_fifo : s_type_normal) < 0)
        goto fail;
    if (group.n && set_text(props, k_group, checked_text(group, 128)) < 0)
        goto fail;
    /* born host and trace context: the reference cuts and cleans them; such text goes to Python */
    if (born_host.n && set_text(props, k_born_host,
                                has_byte(born_host, 1) || has_byte(born_host, 2) ? NULL
                                                                                 : bounded_text(born_host, 128)) < 0)
        goto fail;
    if (has_trace && trace.n &&
        set_text(props, k_trace,
                 has_byte(trace, 1) || has_byte(trace, 2) ? NULL : bounded_text(trace, 1024)) < 0)
        goto fail;
    if (encoding == ENCODING_GZIP && PyDict_SetItem(props, k_encoding, s_gzip) < 0)
        goto fail;
    if (PyUnicode_GET_LENGTH(r->ns) && PyDict_SetItem(props, k_ns, r->ns) < 0)
        goto fail;
    *born_ms = 0;
    if (born.n && timestamp_ms(born, born_ms) < 0)
        goto fail;
    *queue_id = (int32_t)(uint32_t)qid;
    Py_DECREF(keys);
    return 0;
fail:
    Py_DECREF(keys);
    return -1;
}

/* A Message's fields (topic = 1, user_properties = 2, system_properties = 3, body = 4): the topic's
 * two names, the body and the system properties' bytes; with props, the user properties go into it
 * under build_message's rules. -1 when malformed or a topic or system properties field repeats
 * (protobuf would merge them: left to the Python code). */
typedef struct {
    Span topic_ns, topic_name, body, sys;
} MessageFields;

static int message_fields(Span message, MessageFields *m, PyObject *props)
{
    const char *p = message.p, *end = message.p + message.n;
    int seen_topic = 0, seen_sys = 0;
    Field f;
    *m = (MessageFields){{"", 0}, {"", 0}, {"", 0}, {"", 0}};
    while (p < end) {
        if (next_field(&p, end, &f) < 0 || (f.number <= 4 && f.wire != 2))
            return -1;
        if (f.number == 1) {
            if (seen_topic++ || resource_of(f.bytes, &m->topic_ns, &m->topic_name) < 0)
                return -1;
        } else if (f.number == 2) {
            if (props != NULL && add_user_property(props, f.bytes) < 0)
                return -1;
        } else if (f.number == 3) {
            if (seen_sys++)
                return -1;
            m->sys = f.bytes;
        } else if (f.number == 4) {
            m->body = f.bytes;
        }
    }
    return 0;
}

/* One Message: its MessageToStore appended to out and its id to ids; -1 when not for this path */
static int build_one(Span message, SendRules *r, PyObject *out, PyObject *ids)
{
    MessageFields m;
    int fifo = 0;
    int64_t born_ms = 0;
    long long queue_id = 0;
    PyObject *props = PyDict_New(), *id = NULL, *stored = NULL;
    if (props == NULL)
        return -1;
    if (message_fields(message, &m, props) < 0)
        goto fail;
    if (!span_eq(m.topic_ns, r->want_ns) || !span_eq(m.topic_name, r->want_name))
        goto fail;
    if (m.body.n == 0 || m.body.n > r->limit || PyDict_GET_SIZE(props) > r->max_properties)
        goto fail;
    if (add_system_properties(m.sys, r, props, &id, &fifo, &born_ms, &queue_id) < 0)
        goto fail;
    if (queue_id < 0 || queue_id >= r->queue_count) {
        queue_id = r->next_rr % r->queue_count;
        r->next_rr++;
        r->used_rr = 1;
    }
    PyObject *data = PyBytes_FromStringAndSize(m.body.p, m.body.n);
    PyObject *q = PyLong_FromLongLong(queue_id);
    PyObject *b = PyLong_FromLongLong(born_ms > 0 ? born_ms : 0);
    PyObject *zero = PyLong_FromLong(0);
    if (data && q && b && zero)
        stored = new_stored(r->qualified, q, data, props, b, r->peer, zero);
    Py_XDECREF(data);
    Py_XDECREF(q);
    Py_XDECREF(b);
    Py_XDECREF(zero);
    if (stored == NULL || PyList_Append(out, stored) < 0 || PyList_Append(ids, id) < 0)
        goto fail;
    Py_DECREF(stored);
    Py_DECREF(id);
    Py_DECREF(props);
    return 0;
fail:
    Py_XDECREF(stored);
    Py_XDECREF(id);
    Py_DECREF(props);
    return -1;
}

static int span_of_str(PyObject *o, Span *s)
{
    if (!PyUnicode_Check(o))
        return -1;
    s->p = PyUnicode_AsUTF8AndSize(o, &s->n);
    return s->p == NULL ? -1 : 0;
}

/* build_sent(raw, resource_namespace, name, ns, qualified, limit, queue_count, accept_normal,
 *            accept_fifo, max_properties, max_tag_length, max_keys, peer, round_robin)
 *   -> (MessageToStore list, message id list), or None */
static PyObject *build_sent(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 14) {
        PyErr_SetString(PyExc_TypeError, "build_sent takes 14 arguments");
        return NULL;
    }
    if (send_cls == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "build_sent: configure_send() first");
        return NULL;
    }
    SendRules r;
    PyObject *raw = args[0], *round_robin = args[13];
    if (!PyBytes_Check(raw) || !PyDict_Check(round_robin) || span_of_str(args[1], &r.want_ns) < 0 ||
        span_of_str(args[2], &r.want_name) < 0 || !PyUnicode_Check(args[3]) || !PyUnicode_Check(args[4])) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "build_sent: bytes, four str, ints, bools, peer, dict");
        return NULL;
    }
    r.ns = args[3];
    r.qualified = args[4];
    r.peer = args[12];
    r.limit = PyLong_AsSsize_t(args[5]);
    r.queue_count = PyLong_AsLongLong(args[6]);
    r.accept_normal = PyObject_IsTrue(args[7]);
    r.accept_fifo = PyObject_IsTrue(args[8]);
    r.max_properties = PyLong_AsSsize_t(args[9]);
    r.max_tag = PyLong_AsSsize_t(args[10]);
    r.max_keys = PyLong_AsSsize_t(args[11]);
    if (PyErr_Occurred())
        return NULL;
    if (r.queue_count <= 0)
        Py_RETURN_NONE;
    PyObject *position = PyDict_GetItemWithError(round_robin, r.qualified);
    r.next_rr = position == NULL ? 0 : PyLong_AsLongLong(position);
    r.used_rr = 0;
    if (PyErr_Occurred())
        return NULL;
    PyObject *out = PyList_New(0), *ids = PyList_New(0), *result = NULL;
    if (out == NULL || ids == NULL)
        goto done;
    const char *p = PyBytes_AS_STRING(raw), *end = p + PyBytes_GET_SIZE(raw);
    Field f;
    while (p < end) {
        if (next_field(&p, end, &f) < 0)
            goto not_here;
        if (f.number == 1) {
            if (f.wire != 2 || build_one(f.bytes, &r, out, ids) < 0)
                goto not_here;
        }
    }
    if (PyList_GET_SIZE(out) == 0)
        goto not_here;
    if (r.used_rr) {
        PyObject *next = PyLong_FromLongLong(r.next_rr);
        if (next == NULL || PyDict_SetItem(round_robin, r.qualified, next) < 0) {
            Py_XDECREF(next);
            goto done;
        }
        Py_DECREF(next);
    }
    result = PyTuple_Pack(2, out, ids);
    goto done;
not_here:
    PyErr_Clear(); /* whatever went wrong, the Python builder decides (and says why) */
    Py_INCREF(Py_None);
    result = Py_None;
done:
    Py_XDECREF(out);
    Py_XDECREF(ids);
    return result;
}

/* send_sizes(raw) -> ({(resource_namespace, name): [body size, ...]}, [(resource_namespace, name), ...])
 * of a SendMessageRequest's messages, or None when the bytes hold anything else (a repeated topic
 * field, say): the quota and metering totals the interceptor takes before the handler, and the topics
 * its access check reads, one per run of consecutive messages to the same topic (a run's messages
 * name the same resource: checking it once decides as checking each), without a Python object per
 * message */
static PyObject *send_sizes(PyObject *self, PyObject *raw)
{
    if (!PyBytes_Check(raw)) {
        PyErr_SetString(PyExc_TypeError, "send_sizes takes bytes");
        return NULL;
    }
    PyObject *out = PyDict_New(), *runs = PyList_New(0);
    if (out == NULL || runs == NULL) {
        Py_XDECREF(out);
        Py_XDECREF(runs);
        return NULL;
    }
    const char *p = PyBytes_AS_STRING(raw), *end = p + PyBytes_GET_SIZE(raw);
    Field f;
    MessageFields m;
    Span run_ns = {NULL, -1}, run_name = {NULL, -1}; /* the topic of the run so far: none yet */
    while (p < end) {
        if (next_field(&p, end, &f) < 0)
            goto not_here;
        if (f.number != 1)
            continue;
        if (f.wire != 2 || message_fields(f.bytes, &m, NULL) < 0)
            goto not_here;
        PyObject *key = Py_BuildValue("(s#s#)", m.topic_ns.p, m.topic_ns.n, m.topic_name.p, m.topic_name.n);
        if (key == NULL)
            goto not_here;
        if (!span_eq(m.topic_ns, run_ns) || !span_eq(m.topic_name, run_name)) {
            if (PyList_Append(runs, key) < 0) {
                Py_DECREF(key);
                goto not_here;
            }
            run_ns = m.topic_ns;
            run_name = m.topic_name;
        }
        PyObject *sizes = PyDict_GetItemWithError(out, key);
        int rc = -1;
        if (sizes == NULL && !PyErr_Occurred()) {
            sizes = PyList_New(0);
            if (sizes != NULL) {
                rc = PyDict_SetItem(out, key, sizes);
                Py_DECREF(sizes); /* the dict holds it */
            }
        } else if (sizes != NULL) {
            rc = 0;
        }
        Py_DECREF(key);
        PyObject *size = rc < 0 ? NULL : PyLong_FromSsize_t(m.body.n);
        if (size == NULL || PyList_Append(sizes, size) < 0) {
            Py_XDECREF(size);
            goto not_here;
        }
        Py_DECREF(size);
    }
    PyObject *both = PyTuple_Pack(2, out, runs);
    Py_DECREF(out);
    Py_DECREF(runs);
    return both;
not_here:
    Py_DECREF(out);
    Py_DECREF(runs);
    PyErr_Clear(); /* the Python loop decides */
    Py_RETURN_NONE;
}

/* encode_sent(status, built, appended) -> bytes of the SendMessageResponse of a fully stored request:
 * status (a serialized Status) on top and on each entry, with the entry's message id (built[i][0])
 * and queue offset (appended[i][1], AppendEntry.queue_offset). send_message's Python loop over the
 * entries cost more than the parse of these bytes (the tests compare both). */
static PyObject *encode_sent(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "encode_sent(status bytes, built, appended)");
        return NULL;
    }
    PyObject *built = PySequence_Fast(args[1], "encode_sent: built must be a sequence");
    PyObject *appended = built ? PySequence_Fast(args[2], "encode_sent: appended must be a sequence") : NULL;
    const char *status = PyBytes_AS_STRING(args[0]);
    Py_ssize_t status_n = PyBytes_GET_SIZE(args[0]);
    Buf out = {NULL, 0, 0}, entry = {NULL, 0, 0};
    PyObject *result = NULL;
    if (appended == NULL)
        goto done;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(built);
    if (count != PySequence_Fast_GET_SIZE(appended)) {
        PyErr_SetString(PyExc_ValueError, "encode_sent: built and appended differ in length");
        goto done;
    }
    if (put_bytes(&out, 1, status, status_n) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(built, i), *where = PySequence_Fast_GET_ITEM(appended, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) < 1 || !PyUnicode_Check(PyTuple_GET_ITEM(item, 0)) ||
            !PyTuple_Check(where) || PyTuple_GET_SIZE(where) < 2) {
            PyErr_SetString(PyExc_TypeError, "encode_sent: (message id, ...) and AppendEntry items");
            goto done;
        }
        int failed = 0;
        int64_t offset = as_int64(PyTuple_GET_ITEM(where, 1), &failed);
        if (failed)
            goto done;
        entry.len = 0;
        if (put_bytes(&entry, 1, status, status_n) < 0 || put_str(&entry, 2, PyTuple_GET_ITEM(item, 0)) < 0 ||
            (offset != 0 && put_int(&entry, 4, offset) < 0) || put_bytes(&out, 2, entry.data, entry.len) < 0)
            goto done;
    }
    result = PyBytes_FromStringAndSize(out.data ? out.data : "", out.len);
done:
    Py_XDECREF(built);
    Py_XDECREF(appended);
    PyMem_Free(out.data);
    PyMem_Free(entry.data);
    return result;
}

/* ---- AckMessageRequest -> the entries to ack (ack_checked) ---------------------------------------
 *
 * consume.ack_message checks each entry through protobuf's Python API and ReceiptCodec.decode, then
 * builds its answer entry by entry: about half of the broker's work per acked message. ack_checked
 * reads the request's bytes and checks the usual request in one call: every entry a version-2 handle
 * of this group and topic, in flight under that handle's nonce, no handle twice. It changes nothing;
 * the caller acks what it returns. Any other request (a refused entry, a broadcast member's handle,
 * a v1 handle, a field these do not know) gives None, and the Python loop, the reference, answers it
 * entry by entry with the reason it refuses one.
 *
 *   AckMessageRequest: group = 1, topic = 2, entries = 3; AckMessageEntry: message_id = 1,
 *   receipt_handle = 2; AckMessageResponse: status = 1, entries = 2; AckMessageResultEntry:
 *   message_id = 1, receipt_handle = 2, status = 3
 */

static PyObject *s_in_flight;

/* Whether ``text`` (a str attribute) is exactly the bytes of ``s`` */
static int str_is(PyObject *text, const char *s, Py_ssize_t n)
{
    if (!PyUnicode_Check(text) || !PyUnicode_IS_ASCII(text) || PyUnicode_GET_LENGTH(text) != n)
        return 0;
    return memcmp(PyUnicode_1BYTE_DATA(text), s, n) == 0;
}

/* 1 when any queue's offsets hold one offset twice (sorted copies), 0 when none, -1 on error */
static int any_twice(PyObject *per_queue)
{
    Py_ssize_t at = 0;
    PyObject *key, *offsets;
    while (PyDict_Next(per_queue, &at, &key, &offsets)) {
        if (PyList_GET_SIZE(offsets) < 2)
            continue;
        PyObject *sorted = PySequence_List(offsets);
        if (sorted == NULL || PyList_Sort(sorted) < 0) {
            Py_XDECREF(sorted);
            return -1;
        }
        for (Py_ssize_t i = 1; i < PyList_GET_SIZE(sorted); i++) {
            int same = PyObject_RichCompareBool(PyList_GET_ITEM(sorted, i - 1), PyList_GET_ITEM(sorted, i), Py_EQ);
            if (same != 0) {
                Py_DECREF(sorted);
                return same;
            }
        }
        Py_DECREF(sorted);
    }
    return 0;
}

/* ack_checked(raw, mac, group, topic, positions, ok_status) -> ({queue id: [offsets]}, [(message id,
 * attempt)], answer) or None. ``positions`` is PopState's (group, topic, queue id) -> QueuePosition;
 * ``ok_status`` a serialized OK Status, set on the answer and on each of its entries. */
static PyObject *ack_checked(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6 || !PyBytes_Check(args[0]) || !PyUnicode_Check(args[2]) || !PyUnicode_Check(args[3]) ||
        !PyDict_Check(args[4]) || !PyBytes_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "ack_checked(raw, mac, group, topic, positions, ok_status)");
        return NULL;
    }
    PyObject *mac = args[1], *group = args[2], *topic = args[3], *positions = args[4];
    const char *ok = PyBytes_AS_STRING(args[5]);
    Py_ssize_t ok_n = PyBytes_GET_SIZE(args[5]), group_n, topic_n;
    const char *group_s = PyUnicode_AsUTF8AndSize(group, &group_n);
    const char *topic_s = group_s ? PyUnicode_AsUTF8AndSize(topic, &topic_n) : NULL;
    if (topic_s == NULL)
        return NULL;
    const char *p = PyBytes_AS_STRING(args[0]), *end = p + PyBytes_GET_SIZE(args[0]);
    PyObject *per_queue = PyDict_New(), *acked = PyList_New(0), *in_flight = NULL, *offsets = NULL, *result = NULL;
    Buf out = {NULL, 0, 0}, entry = {NULL, 0, 0};
    unsigned char payload[MAX_HANDLE];
    long long queue = -1; /* the queue of in_flight and offsets (a receive's entries come queue by queue) */
    Py_ssize_t count = 0;
    if (per_queue == NULL || acked == NULL || put_bytes(&out, 1, ok, ok_n) < 0)
        goto error;
    while (p < end) {
        Field f;
        if (next_field(&p, end, &f) < 0 || f.wire != 2 || f.number > 3)
            goto fallback;
        if (f.number != 3)
            continue; /* the group and topic: resolved by the caller */
        Span mid = {"", 0}, rh = {"", 0};
        const char *q = f.bytes.p, *qe = q + f.bytes.n;
        while (q < qe) {
            Field g;
            if (next_field(&q, qe, &g) < 0 || g.wire != 2 || (g.number != 1 && g.number != 2))
                goto fallback;
            if (g.number == 1)
                mid = g.bytes;
            else
                rh = g.bytes;
        }
        if (!is_ascii(rh))
            goto fallback;
        HandleParts h;
        int found = handle_parts(mac, (const Py_UCS1 *)rh.p, rh.n, payload, &h);
        if (found < 0)
            goto error;
        if (!found || h.group_n != group_n || memcmp(h.group, group_s, group_n) != 0 || h.topic_n != topic_n ||
            memcmp(h.topic, topic_s, topic_n) != 0)
            goto fallback;
        if (in_flight == NULL || h.qid != queue) {
            Py_CLEAR(in_flight);
            PyObject *qid = PyLong_FromLongLong(h.qid);
            PyObject *key = qid ? PyTuple_Pack(3, group, topic, qid) : NULL;
            PyObject *pos = key ? PyDict_GetItemWithError(positions, key) : NULL; /* borrowed */
            Py_XDECREF(key);
            if (pos == NULL) {
                Py_XDECREF(qid);
                if (PyErr_Occurred())
                    goto error;
                goto fallback;
            }
            in_flight = PyObject_GetAttr(pos, s_in_flight);
            offsets = in_flight ? PyDict_GetItemWithError(per_queue, qid) : NULL; /* borrowed */
            if (offsets == NULL && !PyErr_Occurred()) {
                offsets = PyList_New(0);
                if (offsets != NULL && PyDict_SetItem(per_queue, qid, offsets) < 0)
                    Py_CLEAR(offsets);
                Py_XDECREF(offsets); /* per_queue holds it */
            }
            Py_DECREF(qid);
            if (offsets == NULL)
                goto error;
            if (!PyDict_Check(in_flight))
                goto fallback;
            queue = h.qid;
        }
        PyObject *offset = PyLong_FromLongLong(h.offset);
        if (offset == NULL)
            goto error;
        /* an in-flight entry is a tuple (offset, nonce, attempt, invisible until, waiting): pop.InFlight */
        PyObject *current = PyDict_GetItemWithError(in_flight, offset); /* borrowed */
        int entry_ok = current != NULL && PyTuple_Check(current) && PyTuple_GET_SIZE(current) >= 3;
        PyObject *nonce = entry_ok ? PyTuple_GET_ITEM(current, 1) : NULL;
        PyObject *attempt = entry_ok ? PyTuple_GET_ITEM(current, 2) : NULL;
        Py_XINCREF(nonce);
        Py_XINCREF(attempt);
        if (attempt == NULL || !str_is(nonce, h.nonce, h.nonce_n)) {
            Py_DECREF(offset);
            Py_XDECREF(nonce);
            Py_XDECREF(attempt);
            if (PyErr_Occurred())
                goto error;
            goto fallback; /* not in flight, or under another delivery's nonce: stale */
        }
        Py_DECREF(nonce);
        PyObject *message_id = PyUnicode_DecodeUTF8(mid.p, mid.n, NULL);
        if (message_id == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear(); /* not text: the Python loop answers it (protobuf refuses such a request) */
            Py_DECREF(attempt);
            Py_DECREF(offset);
            goto fallback;
        }
        PyObject *pair = message_id ? PyTuple_Pack(2, message_id, attempt) : NULL;
        int failed = pair == NULL || PyList_Append(acked, pair) < 0 || PyList_Append(offsets, offset) < 0;
        Py_XDECREF(message_id);
        Py_XDECREF(pair);
        Py_DECREF(attempt);
        Py_DECREF(offset);
        if (failed)
            goto error;
        entry.len = 0;
        if ((mid.n && put_bytes(&entry, 1, mid.p, mid.n) < 0) || (rh.n && put_bytes(&entry, 2, rh.p, rh.n) < 0) ||
            put_bytes(&entry, 3, ok, ok_n) < 0 || put_bytes(&out, 2, entry.data, entry.len) < 0)
            goto error;
        count++;
    }
    if (count == 0)
        goto fallback;
    int twice = any_twice(per_queue); /* the second of a handle acked twice is refused as stale */
    if (twice < 0)
        goto error;
    if (twice)
        goto fallback;
    result = Py_BuildValue("(OOy#)", per_queue, acked, out.data, out.len);
    goto done;
fallback:
    result = Py_NewRef(Py_None);
    goto done;
error:
    result = NULL;
done:
    Py_XDECREF(in_flight);
    Py_XDECREF(per_queue);
    Py_XDECREF(acked);
    PyMem_Free(out.data);
    PyMem_Free(entry.data);
    return result;
}

/* configure_send(message_cls, reserved_keys, names): MessageToStore, produce.SYSTEM_PROPERTY_KEYS
 * and the store property names build_message writes (configure's names) -> whether build_sent fills
 * the class's slots itself (new_stored) */
static PyObject *configure_send(PyObject *self, PyObject *args)
{
    PyObject *cls, *reserved, *names;
    if (!PyArg_ParseTuple(args, "OO!O!", &cls, &PyFrozenSet_Type, &reserved, &PyDict_Type, &names))
        return NULL;
    PyObject *done = configure_names(names);
    if (done == NULL)
        return NULL;
    Py_DECREF(done);
    Py_INCREF(cls);
    Py_XSETREF(send_cls, cls);
    send_slots = find_send_slots(cls);
    Py_INCREF(reserved);
    Py_XSETREF(reserved_keys, reserved);
    return PyBool_FromLong(send_slots);
}

/* configure(sha1, hidden_keys, names): names maps the Python builder's property constants to text */
static PyObject *configure(PyObject *self, PyObject *args)
{
    PyObject *sha1, *hidden, *names;
    if (!PyArg_ParseTuple(args, "OO!O!", &sha1, &PyFrozenSet_Type, &hidden, &PyDict_Type, &names))
        return NULL;
    PyObject *done = configure_names(names);
    if (done == NULL)
        return NULL;
    Py_DECREF(done);
    Py_INCREF(sha1);
    Py_XSETREF(sha1_fn, sha1);
    Py_INCREF(hidden);
    Py_XSETREF(hidden_keys, hidden);
    Py_RETURN_NONE;
}

/* untrack(container) -> bool
 *
 * The broker's POP state keeps, per queue, a heap of in-flight offsets and a heap of (invisible
 * until, offset) pairs: lists, which the collector always tracks, so every full collection walked
 * each of their entries (11-17 ms per full collection with 400,000 messages in flight, measured by
 * bench/broker_work.py). CPython itself stops tracking a tuple or dict that holds only atomic values, since such a container can
 * be part of no reference cycle; it never does so for a list. This does it for ``container`` (a list
 * or tuple) and the tuples in it, when every value it holds is atomic: not a container, a tuple of
 * such values, or a tuple the collector already left. It returns False and changes nothing
 * otherwise. The caller must only ever add atomic values to an untracked list later (lists are
 * never tracked again on their own). */
static int atomic_value(PyObject *value, int untrack_tuples)
{
    if (!PyObject_IS_GC(value))
        return 1;
    if (!PyTuple_CheckExact(value))
        return 0;
    /* A tuple the collector no longer tracks (this function's work, or CPython's own) holds nothing
     * it tracks: no need to look at its values, each a read of memory of its own (an export of the
     * POP state read every value of every entry in flight here, on the event loop). */
    if (!PyObject_GC_IsTracked(value))
        return 1;
    Py_ssize_t n = PyTuple_GET_SIZE(value);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyObject_IS_GC(PyTuple_GET_ITEM(value, i)))
            return 0; /* nested containers: left to the collector */
    }
    if (untrack_tuples && PyObject_GC_IsTracked(value))
        PyObject_GC_UnTrack(value);
    return 1;
}

static PyObject *untrack(PyObject *self, PyObject *container)
{
    PyObject **items;
    Py_ssize_t n;
    if (PyList_CheckExact(container)) {
        items = PySequence_Fast_ITEMS(container);
        n = PyList_GET_SIZE(container);
    } else if (PyTuple_CheckExact(container)) {
        items = PySequence_Fast_ITEMS(container);
        n = PyTuple_GET_SIZE(container);
    } else {
        PyErr_Format(PyExc_TypeError, "untrack takes a list or a tuple, not %.100s", Py_TYPE(container)->tp_name);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) { /* look first: nothing changes unless all of it is atomic */
        if (!atomic_value(items[i], 0))
            Py_RETURN_FALSE;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        atomic_value(items[i], 1);
    if (PyObject_GC_IsTracked(container))
        PyObject_GC_UnTrack(container);
    Py_RETURN_TRUE;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(sha1, hidden_keys, names): hashlib.sha1, the property names kept from the user, and the "
     "store property names of the system properties (see consume.py)."},
    {"encode_received", (PyCFunction)(void (*)(void))encode_received, METH_FASTCALL,
     "encode_received(stored, topic, store_host, receipt_handle, attempt, invisible_ms) -> bytes of a "
     "ReceiveMessageResponse carrying the message; fill_v2_message's rules."},
    {"receipt_encode", (PyCFunction)(void (*)(void))receipt_encode, METH_FASTCALL,
     "receipt_encode(mac, group, topic, queue_id, offset, nonce, until) -> a version-2 receipt handle."},
    {"receipt_decode", (PyCFunction)(void (*)(void))receipt_decode, METH_FASTCALL,
     "receipt_decode(mac, text, handle_type) -> the handle's fields as handle_type, or None when text is "
     "not a well-formed, correctly tagged version-2 handle."},
    {"send_sizes", send_sizes, METH_O,
     "send_sizes(raw) -> ({(resource_namespace, name): [body sizes]}, [(resource_namespace, name) per run of "
     "one topic]) of a SendMessageRequest's messages, or None when the bytes are not a plain request."},
    {"encode_sent", (PyCFunction)(void (*)(void))encode_sent, METH_FASTCALL,
     "encode_sent(status, built, appended) -> bytes of a SendMessageResponse: the serialized status on "
     "top and on each entry, each entry's message id (built[i][0]) and queue offset (appended[i][1])."},
    {"ack_checked", (PyCFunction)(void (*)(void))ack_checked, METH_FASTCALL,
     "ack_checked(raw, mac, group, topic, positions, ok_status) -> ({queue id: [offsets]}, [(message id, "
     "attempt)], answer bytes) of an AckMessageRequest whose every entry may be acked, or None."},
    {"untrack", untrack, METH_O,
     "untrack(container) -> True when the list or tuple and the tuples in it hold only atomic values and "
     "the garbage collector no longer walks them; False (nothing changed) otherwise."},
    {"configure_send", configure_send, METH_VARARGS,
     "configure_send(message_cls, reserved_keys, names): MessageToStore, the property keys users may not "
     "set, and the store property names build_message writes (configure's names). True when "
     "build_sent fills the class's slots itself, False when it calls the class."},
    {"build_sent", (PyCFunction)(void (*)(void))build_sent, METH_FASTCALL,
     "build_sent(raw, resource_namespace, name, ns, qualified, limit, queue_count, accept_normal, "
     "accept_fifo, max_properties, max_tag_length, max_keys, peer, round_robin) -> (MessageToStore list, "
     "message ids), or None when any message is not a valid NORMAL or FIFO message of that topic."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_v2_codec",
    "Compiled received messages, receipt handles and sent messages (consume.py, receipt.py, produce.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__v2_codec(void)
{
    s_gzip = PyUnicode_InternFromString("GZIP");
    s_msg_id = PyUnicode_InternFromString("msg_id");
    s_copy = PyUnicode_InternFromString("copy");
    s_update = PyUnicode_InternFromString("update");
    s_digest = PyUnicode_InternFromString("digest");
    s_type_normal = PyUnicode_InternFromString("1");
    s_type_fifo = PyUnicode_InternFromString("2");
    s_space = PyUnicode_InternFromString(" ");
    s_in_flight = PyUnicode_InternFromString("in_flight");
    if (s_in_flight == NULL)
        return NULL;
    if (s_gzip == NULL || s_msg_id == NULL || s_copy == NULL || s_update == NULL || s_digest == NULL ||
        s_type_normal == NULL || s_type_fifo == NULL || s_space == NULL)
        return NULL;
    return PyModule_Create(&module_def);
}
