/* Compiled encoder of received messages: a stored record as the bytes of a v2 ReceiveMessageResponse.
 *
 * The receive path built each message field by field through protobuf's Python API and then
 * serialized it (~14 us a message here, a tenth of what the broker's loop thread spends per consumed
 * message). This writes the same protobuf fields straight into one bytes object. The rules (which
 * store property becomes which system property, which properties are the user's) are those of
 * dataplane.services.consume.fill_v2_message, which stays the reference: the tests parse both
 * encodings and compare them field by field, for every kind of message.
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
#include <stdint.h>
#include <string.h>

/* StoredMessage (dataplane/store/message.py) field positions */
enum { S_QUEUE_ID = 1, S_QUEUE_OFFSET = 2, S_BODY = 4, S_PROPERTIES = 5, S_STORE_TS = 6, S_BORN_TS = 7,
       S_BORN_HOST = 8, S_FIELDS = 16 };

enum { DIGEST_MD5 = 2, ENCODING_IDENTITY = 1, ENCODING_GZIP = 2, TYPE_NORMAL = 1 };

/* Handed over once by configure(): hashlib.md5, the hidden property names, the property keys. */
static PyObject *md5_fn, *hidden_keys;
static PyObject *k_tags, *k_keys, *k_uniq, *k_type, *k_group, *k_born_host, *k_trace, *k_encoding,
    *k_deliver_ms, *k_dlq_topic, *s_gzip, *s_msg_id;

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

/* The body's MD5 as upper-case hex, through hashlib */
static int put_md5(Buf *b, PyObject *body)
{
    PyObject *h = PyObject_CallOneArg(md5_fn, body);
    if (h == NULL)
        return -1;
    PyObject *digest = PyObject_CallMethod(h, "digest", NULL);
    Py_DECREF(h);
    if (digest == NULL)
        return -1;
    if (!PyBytes_Check(digest) || PyBytes_GET_SIZE(digest) != 16) {
        Py_DECREF(digest);
        PyErr_SetString(PyExc_ValueError, "md5 digest is not 16 bytes");
        return -1;
    }
    static const char hex[] = "0123456789ABCDEF";
    char out[2 + 2 + 2 + 32]; /* Digest: type field (2 bytes), checksum tag and length, 32 digits */
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(digest);
    out[0] = (char)(1 << 3);
    out[1] = DIGEST_MD5;
    out[2] = (char)((2 << 3) | 2);
    out[3] = 32;
    for (int i = 0; i < 16; i++) {
        out[4 + 2 * i] = hex[d[i] >> 4];
        out[5 + 2 * i] = hex[d[i] & 15];
    }
    Py_DECREF(digest);
    return put_bytes(b, 4, out, 36);
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
    if (put_md5(sp, PyTuple_GET_ITEM(stored, S_BODY)) < 0)
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
    if (md5_fn == NULL) {
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

/* configure(md5, hidden_keys, names): names maps the Python builder's property constants to text */
static PyObject *configure(PyObject *self, PyObject *args)
{
    PyObject *md5, *hidden, *names;
    if (!PyArg_ParseTuple(args, "OO!O!", &md5, &PyFrozenSet_Type, &hidden, &PyDict_Type, &names))
        return NULL;
    static const char *wanted[] = {"tags", "keys", "uniq", "type", "group", "born_host", "trace",
                                   "encoding", "deliver_ms", "dlq_topic"};
    PyObject **slots[] = {&k_tags, &k_keys, &k_uniq, &k_type, &k_group, &k_born_host, &k_trace,
                          &k_encoding, &k_deliver_ms, &k_dlq_topic};
    for (size_t i = 0; i < sizeof(wanted) / sizeof(wanted[0]); i++) {
        PyObject *value = PyDict_GetItemString(names, wanted[i]);
        if (value == NULL || !PyUnicode_Check(value)) {
            PyErr_Format(PyExc_KeyError, "configure: names[%s] must be a str", wanted[i]);
            return NULL;
        }
        Py_INCREF(value);
        Py_XSETREF(*slots[i], value);
    }
    Py_INCREF(md5);
    Py_XSETREF(md5_fn, md5);
    Py_INCREF(hidden);
    Py_XSETREF(hidden_keys, hidden);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(md5, hidden_keys, names): hashlib.md5, the property names kept from the user, and the "
     "store property names of the system properties (see consume.py)."},
    {"encode_received", (PyCFunction)(void (*)(void))encode_received, METH_FASTCALL,
     "encode_received(stored, topic, store_host, receipt_handle, attempt, invisible_ms) -> bytes of a "
     "ReceiveMessageResponse carrying the message; fill_v2_message's rules."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_v2_codec", "Compiled encoder of received v2 messages (see consume.py).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__v2_codec(void)
{
    s_gzip = PyUnicode_InternFromString("GZIP");
    s_msg_id = PyUnicode_InternFromString("msg_id");
    if (s_gzip == NULL || s_msg_id == NULL)
        return NULL;
    return PyModule_Create(&module_def);
}
