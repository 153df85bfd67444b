/* Compiled CommitLog batch encoder: the same records as record.encode_batch, byte for byte.
 *
 * Why compiled: a 1 KiB append costs about a microsecond of interpreter work per message in the
 * Python encoder (header packing, properties, ConsumeQueue entries, result tuples), several times
 * what the kernel needs to copy the bytes into the page cache. Here the whole batch is written into
 * one buffer in one pass; the Python side keeps everything that is not per-message (locks, segment
 * roll, dispatch). The layout is documented in record.py and docs/store-format.md; the Python
 * encoder stays as the reference and the tests compare the two.
 *
 * configure() hands over, once, the Python objects this module needs (types, errors, caches and
 * the CRC-32 function), so that the names and the messages of errors stay defined in Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

#define HEADER_SIZE 88
#define CQ_ENTRY_SIZE 20
#define MARKER_SIZE 8
#define MESSAGE_MAGIC 0xDAA320A7u
#define BLANK_MAGIC 0xCBD43194u
/* Runs of a batch looked up by linear scan; batches touch few queues. */
#define MAX_SCANNED_RUNS 64

enum {
    F_TOPIC,
    F_QUEUE_ID,
    F_BODY,
    F_PROPERTIES,
    F_FLAG,
    F_SYS_FLAG,
    F_BORN_TIMESTAMP,
    F_BORN_HOST,
    F_RECONSUME_TIMES,
    F_PREPARED_TX_OFFSET,
    N_FIELDS
};

static const char *field_names[N_FIELDS] = {
    "topic", "queue_id", "body", "properties", "flag", "sys_flag",
    "born_timestamp", "born_host", "reconsume_times", "prepared_transaction_offset",
};

typedef struct {
    int configured;
    PyTypeObject *message_type;      /* MessageToStore: its slots are read by offset */
    Py_ssize_t field_offsets[N_FIELDS];
    PyObject *field_strs[N_FIELDS];
    PyTypeObject *entry_type;        /* AppendEntry */
    PyTypeObject *encoding_type;     /* BatchEncoding */
    PyObject *store_error;
    PyObject *invalid_topic_error;
    PyObject *topic_tails;           /* dict topic -> TOPICLENGTH + TOPIC + b"\0\0" */
    PyObject *topic_tail_fn;         /* validates and fills topic_tails */
    PyObject *host_cache;            /* dict (ip, port) -> (4 bytes, port) */
    PyObject *host_fn;
    PyObject *crc32_fn;              /* zlib_ng.crc32 */
    /* zlib-ng's own C entry point in that module's shared object, when it exports one: the same
     * CRC without a Python call (an argument parse, a buffer export and an int) per message */
    uint32_t (*crc32_native)(uint32_t, const unsigned char *, uint32_t);
    PyObject *tag_hashes;            /* dict tag -> CRC-32 of its UTF-8 */
    PyObject *s_tags, *s_keys, *s_uniq;
    PyObject *empty_prefix;
} codec_state;

static codec_state S;

/* big-endian stores (the record layout is Java's byte order) */
static inline void put16(unsigned char *p, uint32_t v) { p[0] = (unsigned char)(v >> 8); p[1] = (unsigned char)v; }

static inline void put32(unsigned char *p, uint32_t v)
{
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap32(v);
    memcpy(p, &v, 4);
#else
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
#endif
}

static inline void put64(unsigned char *p, uint64_t v)
{
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap64(v);
    memcpy(p, &v, 8);
#else
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
#endif
}

/* Value of an exact int that fits one 30-bit digit (flags, counts, small offsets), without a call;
 * anything else goes through the general conversion. */
static inline int small_int(PyObject *v, long long *out)
{
#if PY_VERSION_HEX < 0x030C0000
    if (PyLong_CheckExact(v)) {
        Py_ssize_t size = Py_SIZE(v);
        if (size == 0 || size == 1 || size == -1) {
            long long digit = size ? (long long)((PyLongObject *)v)->ob_digit[0] : 0;
            *out = size < 0 ? -digit : digit;
            return 1;
        }
    }
#else
    if (PyLong_CheckExact(v) && _PyLong_IsCompact((PyLongObject *)v)) {
        *out = (long long)_PyLong_CompactValue((PyLongObject *)v);
        return 1;
    }
#endif
    return 0;
}

/* New reference to a field of a message: by slot offset for MessageToStore, else by attribute. */
static inline PyObject *field(PyObject *msg, int which)
{
    if (Py_TYPE(msg) == S.message_type && S.field_offsets[which] >= 0) {
        PyObject *value = *(PyObject **)((char *)msg + S.field_offsets[which]);
        if (value == NULL) {
            PyErr_Format(PyExc_AttributeError, "message has no %s", field_names[which]);
            return NULL;
        }
        Py_INCREF(value);
        return value;
    }
    return PyObject_GetAttr(msg, S.field_strs[which]);
}

static inline int as_int64(PyObject *msg, int which, Py_ssize_t index, int64_t lo, int64_t hi, int64_t *out)
{
    PyObject *value = field(msg, which);
    if (value == NULL)
        return -1;
    long long v;
    int overflow = 0;
    if (!small_int(value, &v))
        v = PyLong_AsLongLongAndOverflow(value, &overflow);
    Py_DECREF(value);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Format(S.store_error, "message %zd: %s must be an int", index, field_names[which]);
        return -1;
    }
    if (overflow || v < lo || v > hi) {
        PyErr_Format(S.store_error, "message %zd: %s outside [%lld, %lld]", index, field_names[which],
                     (long long)lo, (long long)hi);
        return -1;
    }
    *out = v;
    return 0;
}

static uint32_t crc32_of(PyObject *buffer, int *failed)
{
    if (S.crc32_native != NULL && PyBytes_CheckExact(buffer) && PyBytes_GET_SIZE(buffer) <= UINT32_MAX)
        return S.crc32_native(0, (const unsigned char *)PyBytes_AS_STRING(buffer),
                              (uint32_t)PyBytes_GET_SIZE(buffer));
    PyObject *result = PyObject_CallOneArg(S.crc32_fn, buffer);
    if (result == NULL) {
        *failed = 1;
        return 0;
    }
    uint32_t crc = (uint32_t)PyLong_AsUnsignedLongMask(result);
    Py_DECREF(result);
    return crc;
}

/* CRC-32 of a tag's UTF-8 (0 for none), as record.tag_hash. */
static int tag_hash(PyObject *tag, uint64_t *out)
{
    *out = 0;
    if (tag == NULL || !PyUnicode_Check(tag) || PyUnicode_GET_LENGTH(tag) == 0)
        return 0;
    PyObject *cached = PyDict_GetItemWithError(S.tag_hashes, tag);
    if (cached != NULL) {
        *out = PyLong_AsUnsignedLongLong(cached);
        return 0;
    }
    if (PyErr_Occurred())
        return -1;
    PyObject *raw = PyUnicode_AsUTF8String(tag);
    if (raw == NULL)
        return -1;
    int failed = 0;
    uint32_t crc = crc32_of(raw, &failed);
    Py_DECREF(raw);
    if (failed)
        return -1;
    *out = crc;
    if (PyDict_GET_SIZE(S.tag_hashes) < 65536) {
        PyObject *value = PyLong_FromUnsignedLong(crc);
        if (value == NULL || PyDict_SetItem(S.tag_hashes, tag, value) < 0) {
            Py_XDECREF(value);
            return -1;
        }
        Py_DECREF(value);
    }
    return 0;
}

/* What ``key`` encodes to (new reference): the previous message's answer when it is the same object
 * (a batch mostly repeats its topic and born host), else the Python-side cache, else ``fn(key)``, which
 * validates and fills that cache. ``*last_key`` and ``*last_value`` hold strong references. */
static PyObject *memo_lookup(PyObject *key, PyObject **last_key, PyObject **last_value, PyObject *cache,
                             PyObject *fn)
{
    PyObject *value;
    if (key == *last_key) {
        Py_INCREF(*last_value);
        return *last_value;
    }
    value = PyDict_GetItemWithError(cache, key);
    if (value != NULL)
        Py_INCREF(value);
    else if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_TypeError))
        return NULL;
    else {
        PyErr_Clear(); /* an unhashable key: fn says what is wrong with it */
        if ((value = PyObject_CallOneArg(fn, key)) == NULL)
            return NULL;
    }
    Py_INCREF(key);
    Py_XSETREF(*last_key, key);
    Py_INCREF(value);
    Py_XSETREF(*last_value, value);
    return value;
}

/* Output buffer: a bytearray grown as records are added. */
typedef struct {
    PyObject *array;
    Py_ssize_t used;
} outbuf;

static unsigned char *reserve(outbuf *out, Py_ssize_t extra)
{
    Py_ssize_t capacity = PyByteArray_GET_SIZE(out->array);
    if (out->used + extra > capacity) {
        Py_ssize_t grown = capacity * 2;
        if (grown < out->used + extra)
            grown = out->used + extra;
        if (PyByteArray_Resize(out->array, grown) < 0)
            return NULL;
    }
    return (unsigned char *)PyByteArray_AS_STRING(out->array) + out->used;
}

/* One ConsumeQueue run of the batch: packed entries for (topic, queue id). */
typedef struct {
    PyObject *topic;   /* borrowed from a message kept alive by the batch */
    long long qid;
    PyObject *qid_obj; /* borrowed, as topic */
    int64_t first;
    unsigned char *entries;
    Py_ssize_t count, capacity;
} queue_run;

typedef struct {
    queue_run *runs;
    Py_ssize_t n, capacity, last;
    PyObject *index;   /* (topic, qid) -> run number, once there are many runs */
} run_table;

static void runs_free(run_table *t)
{
    for (Py_ssize_t i = 0; i < t->n; i++)
        PyMem_Free(t->runs[i].entries);
    PyMem_Free(t->runs);
    Py_XDECREF(t->index);
}

static int same_topic(PyObject *a, PyObject *b)
{
    if (a == b)
        return 1;
    return PyUnicode_Compare(a, b) == 0;
}

/* The run for (topic, qid), created from queue_offsets when new; NULL with an error set. */
static queue_run *find_run(run_table *t, PyObject *topic, PyObject *qid_obj, long long qid,
                           PyObject *queue_offsets)
{
    if (t->last >= 0) {
        queue_run *r = &t->runs[t->last];
        if (r->qid == qid && same_topic(r->topic, topic))
            return r;
    }
    PyObject *key = NULL;
    if (t->index == NULL) {
        for (Py_ssize_t i = 0; i < t->n; i++) {
            queue_run *r = &t->runs[i];
            if (r->qid == qid && same_topic(r->topic, topic)) {
                t->last = i;
                return r;
            }
        }
        if (PyErr_Occurred())
            return NULL;
    } else {
        key = PyTuple_Pack(2, topic, qid_obj);
        if (key == NULL)
            return NULL;
        PyObject *at = PyDict_GetItemWithError(t->index, key);
        if (at != NULL) {
            Py_DECREF(key);
            t->last = PyLong_AsSsize_t(at);
            return &t->runs[t->last];
        }
        if (PyErr_Occurred()) {
            Py_DECREF(key);
            return NULL;
        }
    }
    if (qid < 0) {
        Py_XDECREF(key);
        PyErr_Format(S.invalid_topic_error, "queue id: expected >= 0, found %lld", qid);
        return NULL;
    }
    if (key == NULL && (key = PyTuple_Pack(2, topic, qid_obj)) == NULL)
        return NULL;
    int64_t first = 0;
    PyObject *known = PyDict_GetItemWithError(queue_offsets, key);
    if (known != NULL) {
        first = PyLong_AsLongLong(known);
        if (first == -1 && PyErr_Occurred()) {
            Py_DECREF(key);
            return NULL;
        }
    } else if (PyErr_Occurred()) {
        Py_DECREF(key);
        return NULL;
    }
    if (t->n == t->capacity) {
        Py_ssize_t capacity = t->capacity ? t->capacity * 2 : 16;
        queue_run *grown = PyMem_Realloc(t->runs, capacity * sizeof(queue_run));
        if (grown == NULL) {
            Py_DECREF(key);
            PyErr_NoMemory();
            return NULL;
        }
        t->runs = grown;
        t->capacity = capacity;
    }
    if (t->n == MAX_SCANNED_RUNS && t->index == NULL) {
        /* switch to a dict: index every run made so far */
        t->index = PyDict_New();
        for (Py_ssize_t i = 0; t->index != NULL && i < t->n; i++) {
            PyObject *k = PyTuple_Pack(2, t->runs[i].topic, t->runs[i].qid_obj);
            PyObject *v = PyLong_FromSsize_t(i);
            int bad = k == NULL || v == NULL || PyDict_SetItem(t->index, k, v) < 0;
            Py_XDECREF(k);
            Py_XDECREF(v);
            if (bad)
                Py_CLEAR(t->index);
        }
        if (t->index == NULL) {
            Py_DECREF(key);
            return NULL;
        }
    }
    if (t->index != NULL) {
        PyObject *v = PyLong_FromSsize_t(t->n);
        int bad = v == NULL || PyDict_SetItem(t->index, key, v) < 0;
        Py_XDECREF(v);
        if (bad) {
            Py_DECREF(key);
            return NULL;
        }
    }
    Py_DECREF(key);
    queue_run *r = &t->runs[t->n];
    r->topic = topic;
    r->qid = qid;
    r->qid_obj = qid_obj;
    r->first = first;
    r->entries = NULL;
    r->count = r->capacity = 0;
    t->last = t->n++;
    return r;
}

static int run_add(queue_run *r, int64_t pos, int32_t size, uint64_t thash)
{
    if (r->count == r->capacity) {
        Py_ssize_t capacity = r->capacity ? r->capacity * 2 : 32;
        unsigned char *grown = PyMem_Realloc(r->entries, capacity * CQ_ENTRY_SIZE);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        r->entries = grown;
        r->capacity = capacity;
    }
    unsigned char *e = r->entries + r->count * CQ_ENTRY_SIZE;
    put64(e, (uint64_t)pos);
    put32(e + 8, (uint32_t)size);
    put64(e + 12, thash);
    r->count++;
    return 0;
}

/* Write PROPERTIESLENGTH + PROPERTIES ("k\x01v\x02..."); returns their byte count or -1. */
static Py_ssize_t encode_properties(outbuf *out, PyObject *props, Py_ssize_t index)
{
    Py_ssize_t at = out->used;
    if (reserve(out, 2) == NULL)
        return -1;
    out->used += 2;
    Py_ssize_t pos = 0;
    PyObject *name, *value;
    while (PyDict_Next(props, &pos, &name, &value)) {
        if (!PyUnicode_Check(name) || !PyUnicode_Check(value)) {
            PyErr_Format(S.store_error, "message %zd: property %R: names and values must be str", index,
                         name);
            return -1;
        }
        Py_ssize_t nlen, vlen;
        const char *n = PyUnicode_AsUTF8AndSize(name, &nlen);
        if (n == NULL)
            return -1;
        const char *v = PyUnicode_AsUTF8AndSize(value, &vlen);
        if (v == NULL)
            return -1;
        if (nlen == 0 || memchr(n, 1, nlen) || memchr(n, 2, nlen) || memchr(v, 1, vlen) || memchr(v, 2, vlen)) {
            PyErr_Format(S.store_error, "property %R contains a separator character or is empty", name);
            return -1;
        }
        unsigned char *p = reserve(out, nlen + vlen + 2);
        if (p == NULL)
            return -1;
        memcpy(p, n, nlen);
        p[nlen] = 1;
        memcpy(p + nlen + 1, v, vlen);
        p[nlen + 1 + vlen] = 2;
        out->used += nlen + vlen + 2;
    }
    Py_ssize_t length = out->used - at - 2;
    if (length > 65535) {
        PyErr_Format(S.store_error, "message %zd: properties of %zd bytes exceed 65535", index, length);
        return -1;
    }
    put16((unsigned char *)PyByteArray_AS_STRING(out->array) + at, (uint32_t)length);
    return length;
}

static PyObject *new_tuple_of(PyTypeObject *type, Py_ssize_t n)
{
    return type->tp_alloc(type, n);
}

typedef struct {
    PyObject *msgs_fast;
    outbuf out;
    run_table runs;
    PyObject *entries;
    PyObject *index_requests;
} batch_state;

static PyObject *finish(batch_state *b, Py_ssize_t size, Py_ssize_t consumed, int segment_full)
{
    PyObject *pieces = NULL, *queue_runs = NULL, *result = NULL;
    if (PyByteArray_Resize(b->out.array, b->out.used) < 0)
        return NULL;
    pieces = PyList_New(0);
    if (pieces == NULL)
        return NULL;
    if (b->out.used > 0 && PyList_Append(pieces, b->out.array) < 0)
        goto done;
    queue_runs = PyDict_New();
    if (queue_runs == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < b->runs.n; i++) {
        queue_run *r = &b->runs.runs[i];
        PyObject *key = PyTuple_Pack(2, r->topic, r->qid_obj);
        PyObject *first = PyLong_FromLongLong(r->first);
        PyObject *packed = PyByteArray_FromStringAndSize((const char *)r->entries, r->count * CQ_ENTRY_SIZE);
        PyObject *value = key && first && packed ? PyTuple_Pack(2, first, packed) : NULL;
        int bad = value == NULL || PyDict_SetItem(queue_runs, key, value) < 0;
        Py_XDECREF(key);
        Py_XDECREF(first);
        Py_XDECREF(packed);
        Py_XDECREF(value);
        if (bad)
            goto done;
    }
    result = new_tuple_of(S.encoding_type, 7);
    if (result == NULL)
        goto done;
    PyObject *items[7] = {
        pieces, PyLong_FromSsize_t(size), PyLong_FromSsize_t(consumed), b->entries, queue_runs,
        b->index_requests, PyBool_FromLong(segment_full),
    };
    if (items[1] == NULL || items[2] == NULL) {
        Py_XDECREF(items[1]);
        Py_XDECREF(items[2]);
        Py_DECREF(items[6]);
        Py_CLEAR(result);
        goto done;
    }
    Py_INCREF(b->entries);
    Py_INCREF(b->index_requests);
    for (int i = 0; i < 7; i++)
        PyTuple_SET_ITEM(result, i, items[i]);
    return result; /* pieces and queue_runs now owned by result */
done:
    Py_XDECREF(pieces);
    Py_XDECREF(queue_runs);
    return result;
}

/* The per-message loop; see record.encode_batch for the contract. */
static PyObject *encode_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (!S.configured) {
        PyErr_SetString(PyExc_RuntimeError, "_record_codec.configure() was not called");
        return NULL;
    }
    if (nargs != 8 && nargs != 9) {
        PyErr_Format(PyExc_TypeError, "encode_batch takes 8 or 9 arguments, found %zd", nargs);
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    long long physical_offset = PyLong_AsLongLong(args[2]);
    long long space = PyLong_AsLongLong(args[3]);
    long long store_timestamp = PyLong_AsLongLong(args[4]);
    PyObject *store_host = args[5];
    PyObject *queue_offsets = args[6];
    long long max_message_size = PyLong_AsLongLong(args[7]);
    PyObject *msg_id_prefix = nargs == 9 ? args[8] : S.empty_prefix;
    if (PyErr_Occurred())
        return NULL;
    if (!PyDict_Check(queue_offsets) || !PyUnicode_Check(msg_id_prefix)) {
        PyErr_SetString(PyExc_TypeError, "encode_batch: queue_offsets must be a dict, msg_id_prefix a str");
        return NULL;
    }
    const char *store_ip;
    Py_ssize_t store_ip_len;
    long store_port;
    if (!PyTuple_Check(store_host) || PyTuple_GET_SIZE(store_host) != 2 ||
        PyBytes_AsStringAndSize(PyTuple_GET_ITEM(store_host, 0), (char **)&store_ip, &store_ip_len) < 0 ||
        store_ip_len != 4) {
        PyErr_Clear();
        PyErr_SetString(S.store_error, "store host: expected (4 raw bytes, port)");
        return NULL;
    }
    store_port = PyLong_AsLong(PyTuple_GET_ITEM(store_host, 1));
    if (store_port == -1 && PyErr_Occurred())
        return NULL;

    batch_state b = {0};
    b.runs.last = -1;
    PyObject *result = NULL;
    PyObject *ts_obj = NULL;
    /* the previous message's topic and born host with what they encode to (strong references) */
    PyObject *last_topic = NULL, *last_tail = NULL, *last_born = NULL, *last_raw = NULL;
    b.msgs_fast = PySequence_Fast(args[0], "encode_batch: msgs must be a sequence");
    if (b.msgs_fast == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(b.msgs_fast);
    PyObject **msgs = PySequence_Fast_ITEMS(b.msgs_fast);
    b.entries = PyList_New(0);
    b.index_requests = PyList_New(0);
    ts_obj = PyLong_FromLongLong(store_timestamp);
    /* a first guess at the batch's size; reserve() doubles it when it runs short */
    Py_ssize_t guess = (n - start) * (HEADER_SIZE + 1024 + 64) + MARKER_SIZE;
    if (guess > space || guess < 0)
        guess = space > 0 ? (Py_ssize_t)space : 0;
    b.out.array = PyByteArray_FromStringAndSize(NULL, guess);
    if (b.entries == NULL || b.index_requests == NULL || ts_obj == NULL || b.out.array == NULL)
        goto done;

    long long pos = physical_offset;
    long long limit = physical_offset + space - MARKER_SIZE;
    for (Py_ssize_t index = start; index < n; index++) {
        PyObject *msg = msgs[index];
        PyObject *topic = NULL, *props = NULL, *body = NULL, *qid_obj = NULL, *born = NULL;
        Py_buffer view = {0};
        int ok = 0;
        Py_ssize_t record_at = b.out.used;
        int64_t flag, sys_flag, born_ts, reconsume, prepared, born_port;
        do {
            topic = field(msg, F_TOPIC);
            if (topic == NULL)
                break;
            PyObject *tail = memo_lookup(topic, &last_topic, &last_tail, S.topic_tails, S.topic_tail_fn);
            if (tail == NULL)
                break;
            if (!PyBytes_Check(tail) || PyBytes_GET_SIZE(tail) < 3) {
                Py_DECREF(tail);
                PyErr_SetString(PyExc_TypeError, "topic tail must be bytes");
                break;
            }
            props = field(msg, F_PROPERTIES);
            body = field(msg, F_BODY);
            if (props != NULL && body != NULL && PyBytes_CheckExact(body)) {
                /* bytes need no buffer export: point at them (view.obj stays NULL) */
                view.buf = PyBytes_AS_STRING(body);
                view.len = PyBytes_GET_SIZE(body);
            } else if (props == NULL || body == NULL || PyObject_GetBuffer(body, &view, PyBUF_SIMPLE) < 0) {
                Py_DECREF(tail);
                break;
            }
            if (!PyDict_Check(props)) {
                Py_DECREF(tail);
                PyErr_Format(S.store_error, "message %zd: properties must be a dict", index);
                break;
            }
            /* header placeholder, BODY, TOPICLENGTH + TOPIC, then PROPERTIESLENGTH + PROPERTIES */
            Py_ssize_t tail_len = PyBytes_GET_SIZE(tail);
            unsigned char *p = reserve(&b.out, HEADER_SIZE + view.len + tail_len);
            if (p == NULL) {
                Py_DECREF(tail);
                break;
            }
            memcpy(p + HEADER_SIZE, view.buf, view.len);
            memcpy(p + HEADER_SIZE + view.len, PyBytes_AS_STRING(tail), tail_len - 2);
            Py_DECREF(tail);
            b.out.used += HEADER_SIZE + view.len + tail_len - 2;
            uint64_t thash = 0;
            PyObject *keys = NULL, *uniq = NULL;
            if (PyDict_GET_SIZE(props) > 0) {
                if (encode_properties(&b.out, props, index) < 0)
                    break;
                if (tag_hash(PyDict_GetItemWithError(props, S.s_tags), &thash) < 0 || PyErr_Occurred())
                    break;
                keys = PyDict_GetItemWithError(props, S.s_keys);
                if (keys == NULL && PyErr_Occurred())
                    break;
                uniq = PyDict_GetItemWithError(props, S.s_uniq);
                if (uniq == NULL && PyErr_Occurred())
                    break;
            } else {
                unsigned char *q = reserve(&b.out, 2);
                if (q == NULL)
                    break;
                q[0] = q[1] = 0;
                b.out.used += 2;
            }
            long long size = b.out.used - record_at;
            if (size > max_message_size) {
                PyErr_Format(S.store_error, "message %zd: size %lld exceeds the limit %lld", index, size,
                             max_message_size);
                break;
            }
            if (pos + size > limit) {
                /* the end-of-segment marker replaces what was staged for this message */
                b.out.used = record_at;
                unsigned char *m = reserve(&b.out, MARKER_SIZE);
                if (m == NULL)
                    break;
                put32(m, (uint32_t)(physical_offset + space - pos));
                put32(m + 4, BLANK_MAGIC);
                b.out.used += MARKER_SIZE;
                Py_XDECREF(topic);
                Py_XDECREF(props);
                Py_XDECREF(body);
                if (view.obj != NULL)
                    PyBuffer_Release(&view);
                result = finish(&b, (Py_ssize_t)(pos - physical_offset + MARKER_SIZE), index - start, 1);
                goto done;
            }
            qid_obj = field(msg, F_QUEUE_ID);
            if (qid_obj == NULL)
                break;
            int overflow = 0;
            long long qid = PyLong_AsLongLongAndOverflow(qid_obj, &overflow);
            if (qid == -1 && PyErr_Occurred())
                break;
            if (overflow || qid > INT32_MAX) {
                PyErr_Format(S.store_error, "message %zd: queue_id outside [0, %d]", index, INT32_MAX);
                break;
            }
            queue_run *run = find_run(&b.runs, topic, qid_obj, qid, queue_offsets);
            if (run == NULL)
                break;
            int64_t qoff = run->first + run->count;
            if (as_int64(msg, F_FLAG, index, INT32_MIN, INT32_MAX, &flag) < 0 ||
                as_int64(msg, F_SYS_FLAG, index, INT32_MIN, INT32_MAX, &sys_flag) < 0 ||
                as_int64(msg, F_BORN_TIMESTAMP, index, INT64_MIN, INT64_MAX, &born_ts) < 0 ||
                as_int64(msg, F_RECONSUME_TIMES, index, INT32_MIN, INT32_MAX, &reconsume) < 0 ||
                as_int64(msg, F_PREPARED_TX_OFFSET, index, INT64_MIN, INT64_MAX, &prepared) < 0)
                break;
            born = field(msg, F_BORN_HOST);
            if (born == NULL)
                break;
            PyObject *raw = memo_lookup(born, &last_born, &last_raw, S.host_cache, S.host_fn);
            if (raw == NULL)
                break;
            const char *born_ip;
            Py_ssize_t born_ip_len;
            if (!PyTuple_Check(raw) || PyTuple_GET_SIZE(raw) != 2 ||
                PyBytes_AsStringAndSize(PyTuple_GET_ITEM(raw, 0), (char **)&born_ip, &born_ip_len) < 0 ||
                born_ip_len != 4) {
                Py_DECREF(raw);
                PyErr_Clear();
                PyErr_Format(S.store_error, "message %zd: born host is not an IPv4 (ip, port)", index);
                break;
            }
            born_port = PyLong_AsLong(PyTuple_GET_ITEM(raw, 1));
            char born_ip_copy[4];
            memcpy(born_ip_copy, born_ip, 4);
            Py_DECREF(raw);
            if (born_port == -1 && PyErr_Occurred())
                break;
            int failed = 0;
            uint32_t crc = crc32_of(body, &failed);
            if (failed)
                break;
            if (run_add(run, pos, (int32_t)size, thash) < 0)
                break;
            if ((keys != NULL && PyObject_IsTrue(keys)) || (uniq != NULL && PyObject_IsTrue(uniq))) {
                PyObject *request = Py_BuildValue("(OOOL)", topic, keys ? keys : Py_None,
                                                  uniq ? uniq : Py_None, pos);
                int bad = request == NULL || PyList_Append(b.index_requests, request) < 0;
                Py_XDECREF(request);
                if (bad) {
                    run->count--;
                    break;
                }
            }
            unsigned char *h = (unsigned char *)PyByteArray_AS_STRING(b.out.array) + record_at;
            put32(h, (uint32_t)size);
            put32(h + 4, MESSAGE_MAGIC);
            put32(h + 8, crc);
            put32(h + 12, (uint32_t)qid);
            put32(h + 16, (uint32_t)flag);
            put64(h + 20, (uint64_t)qoff);
            put64(h + 28, (uint64_t)pos);
            put32(h + 36, (uint32_t)sys_flag);
            put64(h + 40, (uint64_t)born_ts);
            memcpy(h + 48, born_ip_copy, 4);
            put32(h + 52, (uint32_t)born_port);
            put64(h + 56, (uint64_t)store_timestamp);
            memcpy(h + 64, store_ip, 4);
            put32(h + 68, (uint32_t)store_port);
            put32(h + 72, (uint32_t)reconsume);
            put64(h + 76, (uint64_t)prepared);
            put32(h + 84, (uint32_t)view.len);
            PyObject *entry = new_tuple_of(S.entry_type, 5);
            PyObject *e_pos = PyLong_FromLongLong(pos), *e_qoff = PyLong_FromLongLong(qoff);
            PyObject *e_size = PyLong_FromLongLong(size);
            if (entry == NULL || e_pos == NULL || e_qoff == NULL || e_size == NULL) {
                Py_XDECREF(entry);
                Py_XDECREF(e_pos);
                Py_XDECREF(e_qoff);
                Py_XDECREF(e_size);
                break;
            }
            Py_INCREF(ts_obj);
            Py_INCREF(msg_id_prefix);
            PyTuple_SET_ITEM(entry, 0, e_pos);
            PyTuple_SET_ITEM(entry, 1, e_qoff);
            PyTuple_SET_ITEM(entry, 2, ts_obj);
            PyTuple_SET_ITEM(entry, 3, e_size);
            PyTuple_SET_ITEM(entry, 4, msg_id_prefix);
            int bad = PyList_Append(b.entries, entry) < 0;
            Py_DECREF(entry);
            if (bad)
                break;
            pos += size;
            ok = 1;
        } while (0);
        Py_XDECREF(topic);
        Py_XDECREF(props);
        Py_XDECREF(body);
        Py_XDECREF(qid_obj);
        Py_XDECREF(born);
        if (view.obj != NULL)
            PyBuffer_Release(&view);
        if (!ok)
            goto done;
    }
    result = finish(&b, (Py_ssize_t)(pos - physical_offset), n - start, 0);
done:
    Py_XDECREF(last_topic);
    Py_XDECREF(last_tail);
    Py_XDECREF(last_born);
    Py_XDECREF(last_raw);
    runs_free(&b.runs);
    Py_XDECREF(b.out.array);
    Py_XDECREF(b.entries);
    Py_XDECREF(b.index_requests);
    Py_XDECREF(b.msgs_fast);
    Py_XDECREF(ts_obj);
    return result;
}

static void set_ref(PyObject **slot, PyObject *value)
{
    Py_XINCREF(value);
    Py_XSETREF(*slot, value);
}

static PyObject *configure(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"message_type", "entry_type", "encoding_type", "store_error",
                            "invalid_topic_error", "topic_tails", "topic_tail_fn", "host_cache",
                            "host_fn", "crc32_fn", "crc32_library", NULL};
    PyObject *message_type, *entry_type, *encoding_type, *store_error, *invalid_topic_error;
    PyObject *topic_tails, *topic_tail_fn, *host_cache, *host_fn, *crc32_fn;
    const char *crc32_library = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!O!OOO!OO!OO|z:configure", names, &PyType_Type,
                                     &message_type, &PyType_Type, &entry_type, &PyType_Type, &encoding_type,
                                     &store_error, &invalid_topic_error, &PyDict_Type, &topic_tails,
                                     &topic_tail_fn, &PyDict_Type, &host_cache, &host_fn, &crc32_fn,
                                     &crc32_library))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)entry_type, &PyTuple_Type) ||
        !PyType_IsSubtype((PyTypeObject *)encoding_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "configure: entry_type and encoding_type must be tuple subclasses");
        return NULL;
    }
    PyTypeObject *mt = (PyTypeObject *)message_type;
    for (int i = 0; i < N_FIELDS; i++) {
        PyObject *name = PyUnicode_InternFromString(field_names[i]);
        if (name == NULL)
            return NULL;
        Py_XSETREF(S.field_strs[i], name);
        /* a slots class keeps each field at a fixed offset: read it there, past the attribute lookup */
        S.field_offsets[i] = -1;
        PyObject *descr = PyDict_GetItemWithError(mt->tp_dict, name);
        if (descr != NULL && Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
            PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
            if (member->type == T_OBJECT_EX || member->type == T_OBJECT)
                S.field_offsets[i] = member->offset;
        } else if (descr == NULL && PyErr_Occurred()) {
            return NULL;
        }
    }
    set_ref((PyObject **)&S.message_type, message_type);
    set_ref((PyObject **)&S.entry_type, entry_type);
    set_ref((PyObject **)&S.encoding_type, encoding_type);
    set_ref(&S.store_error, store_error);
    set_ref(&S.invalid_topic_error, invalid_topic_error);
    set_ref(&S.topic_tails, topic_tails);
    set_ref(&S.topic_tail_fn, topic_tail_fn);
    set_ref(&S.host_cache, host_cache);
    set_ref(&S.host_fn, host_fn);
    set_ref(&S.crc32_fn, crc32_fn);
    S.crc32_native = NULL;
    if (crc32_library != NULL) {
        /* already loaded by the import of crc32_fn's module: RTLD_NOLOAD finds it, never loads */
        void *lib = dlopen(crc32_library, RTLD_NOW | RTLD_NOLOAD);
        if (lib != NULL)
            S.crc32_native = (uint32_t(*)(uint32_t, const unsigned char *, uint32_t))dlsym(lib, "zng_crc32");
    }
    if (S.tag_hashes == NULL && (S.tag_hashes = PyDict_New()) == NULL)
        return NULL;
    if (S.s_tags == NULL) {
        S.s_tags = PyUnicode_InternFromString("TAGS");
        S.s_keys = PyUnicode_InternFromString("KEYS");
        S.s_uniq = PyUnicode_InternFromString("UNIQ_KEY");
        S.empty_prefix = PyUnicode_FromString("");
        if (S.s_tags == NULL || S.s_keys == NULL || S.s_uniq == NULL || S.empty_prefix == NULL)
            return NULL;
    }
    S.configured = 1;
    Py_RETURN_NONE;
}

/* --- ConsumeQueue runs, once the CommitLog write succeeded ---------------------------------------
 *
 * Why compiled: a batch over 8 queues spent about a sixth of its append time in two Python loops
 * over the runs above (advance the next queue offsets; write each run into its ConsumeQueue). The
 * usual case is the same every time: the run starts at the queue's max offset and fits in its last
 * file, so it is copied into that file's mapping and three attributes move. Anything else (a new
 * queue, a new file, an overlap after recovery) goes to the Python put given as ``put``, which stays
 * the reference: consume_queue.ConsumeQueue.put. The attribute names read here are those of
 * ConsumeQueue, MappedFileQueue and MappedFile; tests/unit/store/test_queue_runs.py pins them.
 */

static PyObject *s_max_offset, *s_queue, *s_files, *s_file_size, *s_file_from_offset, *s_wrote_position,
    *s_mm, *s_dirty;

static int attr_i64(PyObject *obj, PyObject *name, int64_t *out)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    long long x = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (x == -1 && PyErr_Occurred())
        return -1;
    *out = x;
    return 0;
}

static int set_i64(PyObject *obj, PyObject *name, int64_t value)
{
    PyObject *v = PyLong_FromLongLong(value);
    if (v == NULL)
        return -1;
    int rc = PyObject_SetAttr(obj, name, v);
    Py_DECREF(v);
    return rc;
}

/* Run `first`.. into ConsumeQueue `cq` the fast way: 1 done (*new_max set), 0 not this way, -1 error. */
static int put_run_fast(PyObject *cq, int64_t first, const char *data, Py_ssize_t len, int64_t *new_max)
{
    int64_t max_offset, file_size, from, wrote;
    if (attr_i64(cq, s_max_offset, &max_offset) < 0)
        return -1;
    if (first != max_offset)
        return 0;
    int rc = -1;
    PyObject *queue = NULL, *files = NULL, *mf = NULL, *mm = NULL;
    if ((queue = PyObject_GetAttr(cq, s_queue)) == NULL || (files = PyObject_GetAttr(queue, s_files)) == NULL)
        goto done;
    if (!PyList_Check(files) || PyList_GET_SIZE(files) == 0) {
        rc = 0;
        goto done;
    }
    mf = PyList_GET_ITEM(files, PyList_GET_SIZE(files) - 1);
    Py_INCREF(mf);
    if (attr_i64(queue, s_file_size, &file_size) < 0 || attr_i64(mf, s_file_from_offset, &from) < 0 ||
        attr_i64(mf, s_wrote_position, &wrote) < 0)
        goto done;
    int64_t rel = first * CQ_ENTRY_SIZE - from, end = rel + len;
    if (rel < 0 || wrote > rel || end > file_size) {
        rc = 0;
        goto done;
    }
    if ((mm = PyObject_GetAttr(mf, s_mm)) == NULL)
        goto done;
    Py_buffer view;
    if (PyObject_GetBuffer(mm, &view, PyBUF_WRITABLE) < 0) /* closed: ValueError, as Python's put */
        goto done;
    if (end > view.len) {
        PyBuffer_Release(&view);
        rc = 0;
        goto done;
    }
    memcpy((char *)view.buf + rel, data, (size_t)len);
    PyBuffer_Release(&view);
    /* max_offset last: readers go by it, so the entries are in place before they can be seen */
    *new_max = first + len / CQ_ENTRY_SIZE;
    if (set_i64(mf, s_wrote_position, end) < 0 || PyObject_SetAttr(cq, s_dirty, Py_True) < 0 ||
        set_i64(cq, s_max_offset, *new_max) < 0)
        goto done;
    rc = 1;
done:
    Py_XDECREF(queue);
    Py_XDECREF(files);
    Py_XDECREF(mf);
    Py_XDECREF(mm);
    return rc;
}

/* One run's (first offset, packed entries) from a queue_runs value; -1 with TypeError when malformed. */
static int run_value(PyObject *value, int64_t *first, Py_buffer *entries)
{
    if (!PyTuple_Check(value) || PyTuple_GET_SIZE(value) != 2) {
        PyErr_SetString(PyExc_TypeError, "queue_runs: expected (first offset, packed entries) values");
        return -1;
    }
    long long f = PyLong_AsLongLong(PyTuple_GET_ITEM(value, 0));
    if (f == -1 && PyErr_Occurred())
        return -1;
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(value, 1), entries, PyBUF_SIMPLE) < 0)
        return -1;
    if (entries->len % CQ_ENTRY_SIZE) {
        PyBuffer_Release(entries);
        PyErr_Format(PyExc_ValueError, "queue_runs: expected a multiple of %d bytes, found %zd", CQ_ENTRY_SIZE,
                     entries->len);
        return -1;
    }
    *first = f;
    return 0;
}

static PyObject *write_queue_runs(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyDict_Check(args[0]) || !PyDict_Check(args[1]) || !PyCallable_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "write_queue_runs(queue_runs: dict, queues: dict, put: callable)");
        return NULL;
    }
    PyObject *runs = args[0], *queues = args[1], *put = args[2];
    PyObject *moved = PyDict_New();
    if (moved == NULL)
        return NULL;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(runs, &pos, &key, &value)) {
        int64_t first, new_max = 0;
        Py_buffer entries;
        if (run_value(value, &first, &entries) < 0)
            goto fail;
        PyObject *cq = PyDict_GetItemWithError(queues, key);
        if (cq == NULL && PyErr_Occurred()) {
            PyBuffer_Release(&entries);
            goto fail;
        }
        Py_XINCREF(cq);
        int rc = cq != NULL ? put_run_fast(cq, first, entries.buf, entries.len, &new_max) : 0;
        Py_XDECREF(cq);
        PyBuffer_Release(&entries);
        if (rc < 0)
            goto fail;
        PyObject *max_obj;
        if (rc == 0) {
            max_obj = PyObject_CallFunctionObjArgs(put, key, PyTuple_GET_ITEM(value, 0),
                                                   PyTuple_GET_ITEM(value, 1), NULL);
        } else {
            max_obj = PyLong_FromLongLong(new_max);
        }
        if (max_obj == NULL)
            goto fail;
        int bad = PyDict_SetItem(moved, key, max_obj) < 0;
        Py_DECREF(max_obj);
        if (bad)
            goto fail;
    }
    return moved;
fail:
    Py_DECREF(moved);
    return NULL;
}

static PyObject *advance_queue_offsets(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyDict_Check(args[0]) || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "advance_queue_offsets(queue_runs: dict, offsets: dict)");
        return NULL;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(args[0], &pos, &key, &value)) {
        int64_t first;
        Py_buffer entries;
        if (run_value(value, &first, &entries) < 0)
            return NULL;
        PyObject *next = PyLong_FromLongLong(first + entries.len / CQ_ENTRY_SIZE);
        PyBuffer_Release(&entries);
        int bad = next == NULL || PyDict_SetItem(args[1], key, next) < 0;
        Py_XDECREF(next);
        if (bad)
            return NULL;
    }
    Py_RETURN_NONE;
}

/* IndexFile.put_keys' loop (index_file.py documents the layout): for each (key, physical offset) of
 * items[start:end], the entry at entries_at + number * 20 and the head of its hash slot, as the
 * Python loop writes them. Returns (number, slots, last physical offset); the caller writes the
 * header. Compiled because it runs for every key of every stored message (and every trace record). */
#define INDEX_ENTRY_SIZE 20

static uint32_t key_crc(PyObject *key, int *failed)
{
    Py_ssize_t len;
    const char *utf8 = PyUnicode_AsUTF8AndSize(key, &len);
    if (utf8 == NULL) {
        *failed = 1;
        return 0;
    }
    if (S.crc32_native != NULL && len <= UINT32_MAX)
        return S.crc32_native(0, (const unsigned char *)utf8, (uint32_t)len);
    PyObject *raw = PyBytes_FromStringAndSize(utf8, len);
    if (raw == NULL) {
        *failed = 1;
        return 0;
    }
    uint32_t crc = crc32_of(raw, failed);
    Py_DECREF(raw);
    return crc;
}

/* index_items(requests) -> [(key, physical offset), ...]: IndexService.put_batch's keys of a batch's
 * index requests (topic, KEYS, UNIQ_KEY, physical offset): "topic#key" for each whitespace-separated
 * KEYS word, "#" + UNIQ_KEY (index_service.index_items_python is the reference) */
static PyObject *index_items(PyObject *module, PyObject *requests)
{
    static PyObject *hash;
    if (hash == NULL && (hash = PyUnicode_InternFromString("#")) == NULL)
        return NULL;
    PyObject *seq = PySequence_Fast(requests, "index_items takes a sequence of index requests");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *items = PyList_New(0);
    if (items == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 4 || !PyUnicode_Check(PyTuple_GET_ITEM(r, 0))) {
            PyErr_SetString(PyExc_TypeError, "index_items: requests are (topic, keys, uniq_key, offset)");
            goto fail;
        }
        PyObject *topic = PyTuple_GET_ITEM(r, 0), *keys = PyTuple_GET_ITEM(r, 1);
        PyObject *uniq = PyTuple_GET_ITEM(r, 2), *offset = PyTuple_GET_ITEM(r, 3);
        int has_keys = PyObject_IsTrue(keys), has_uniq = PyObject_IsTrue(uniq);
        if (has_keys < 0 || has_uniq < 0)
            goto fail;
        if (has_keys) {
            PyObject *words = PyUnicode_Split(keys, NULL, -1);
            if (words == NULL)
                goto fail;
            for (Py_ssize_t w = 0; w < PyList_GET_SIZE(words); w++) {
                PyObject *key = PyUnicode_FromFormat("%U#%U", topic, PyList_GET_ITEM(words, w));
                PyObject *item = key ? PyTuple_Pack(2, key, offset) : NULL;
                Py_XDECREF(key);
                if (item == NULL || PyList_Append(items, item) < 0) {
                    Py_XDECREF(item);
                    Py_DECREF(words);
                    goto fail;
                }
                Py_DECREF(item);
            }
            Py_DECREF(words);
        }
        if (has_uniq) {
            PyObject *key = PyUnicode_Concat(hash, uniq);
            PyObject *item = key ? PyTuple_Pack(2, key, offset) : NULL;
            Py_XDECREF(key);
            if (item == NULL || PyList_Append(items, item) < 0) {
                Py_XDECREF(item);
                goto fail;
            }
            Py_DECREF(item);
        }
    }
    Py_DECREF(seq);
    return items;
fail:
    Py_DECREF(seq);
    Py_XDECREF(items);
    return NULL;
}

/* index_put_keys(slot_table, dirty, tail, items, start, end, slot_num, number, slots, diff,
 * physical_offset) -> (next number, slots in use, last physical offset, error): IndexFile.put_keys's
 * loop. The hash slots are ``slot_table`` (the file's slots kept in memory, a bytearray; ``dirty`` has
 * a byte per 4 KiB page of it, set to 1 when a slot of the page changes); the entries are appended to
 * ``tail`` (a bytearray: the entries not yet written to the file, which IndexFile writes in runs), a
 * chunk's before the slots that point at them change. index_file.py says why.
 * ``error`` is None, or the exception that stopped the loop (a bad item, no memory), returned rather
 * than raised: the chunks before it are in the table already, and the caller must count them, or its
 * next put would reuse their entry numbers and cut the chains through them. */
static PyObject *index_put_keys(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 11 || !PyByteArray_Check(args[2]) || !PyList_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "index_put_keys(slot_table, dirty, tail: bytearray, items: list, "
                                         "start, end, slot_num, number, slots, diff, physical_offset)");
        return NULL;
    }
    long long v[7];
    for (int i = 0; i < 7; i++) {
        v[i] = PyLong_AsLongLong(args[4 + i]);
        if (v[i] == -1 && PyErr_Occurred())
            return NULL;
    }
    long long start = v[0], end = v[1], slot_num = v[2], number = v[3], slots = v[4];
    long long diff = v[5], physical_offset = v[6];
    PyObject *tail = args[2], *items = args[3];
    if (start < 0 || end > PyList_GET_SIZE(items) || slot_num <= 0 || number <= 0 || diff < 0 ||
        diff > INT32_MAX || number + (end - start) > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "index_put_keys: arguments out of range");
        return NULL;
    }
    Py_buffer view, dirty_view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[1], &dirty_view, PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    unsigned char *table = view.buf, *dirty = dirty_view.buf;
    long long slots_done = slots; /* slots in use after the last chunk written whole */
    if (slot_num * 4 > view.len || (slot_num * 4 + 4095) / 4096 > dirty_view.len) {
        PyErr_SetString(PyExc_ValueError, "index_put_keys: the slot table or its page map is too small");
        goto fail;
    }
    /* Per chunk: hash the keys and prefetch their slots (random over 20 MB by default: a cache and
     * TLB miss each, overlapped when prefetched together); link the entries (a key's head is the
     * newest earlier key of the chunk in its slot, else the table's); write the entries; then set
     * the slots and mark their pages. */
    enum { CHUNK = 64 };
    uint32_t hashes[CHUNK];
    long long offsets[CHUNK], slot_of[CHUNK];
    unsigned char entries[CHUNK * INDEX_ENTRY_SIZE];
    for (long long first = start; first < end; first += CHUNK) {
        long long count = (first + CHUNK < end ? first + CHUNK : end) - first;
        for (long long i = 0; i < count; i++) {
            PyObject *item = PyList_GET_ITEM(items, first + i);
            if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2 ||
                !PyUnicode_Check(PyTuple_GET_ITEM(item, 0))) {
                PyErr_SetString(PyExc_TypeError, "index_put_keys: items are (key: str, physical offset: int)");
                goto fail;
            }
            long long offset = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 1));
            if (offset == -1 && PyErr_Occurred())
                goto fail;
            int failed = 0;
            uint32_t h = key_crc(PyTuple_GET_ITEM(item, 0), &failed) & 0x7FFFFFFFu;
            if (failed)
                goto fail;
            hashes[i] = h;
            offsets[i] = offset;
            slot_of[i] = (long long)(h % (uint64_t)slot_num);
            __builtin_prefetch(table + slot_of[i] * 4, 1, 1);
        }
        for (long long i = 0; i < count; i++) {
            int32_t head = -1;
            for (long long j = i - 1; j >= 0; j--) { /* an earlier key of the chunk in the same slot */
                if (slot_of[j] == slot_of[i]) {
                    head = (int32_t)(number + j);
                    break;
                }
            }
            if (head < 0) {
                const unsigned char *s = table + slot_of[i] * 4;
                head = (int32_t)(((uint32_t)s[0] << 24) | ((uint32_t)s[1] << 16) | ((uint32_t)s[2] << 8) | s[3]);
                if (head <= 0 || head >= number) {
                    head = 0;
                    slots++;
                }
            }
            unsigned char *e = entries + i * INDEX_ENTRY_SIZE;
            put32(e, hashes[i]);
            put64(e + 4, (uint64_t)offsets[i]);
            put32(e + 12, (uint32_t)diff);
            put32(e + 16, (uint32_t)head);
        }
        Py_ssize_t had = PyByteArray_GET_SIZE(tail), n = (Py_ssize_t)count * INDEX_ENTRY_SIZE;
        if (PyByteArray_Resize(tail, had + n) < 0) /* no memory, or a reader holds a view of it */
            goto fail;
        memcpy(PyByteArray_AS_STRING(tail) + had, entries, (size_t)n);
        for (long long i = 0; i < count; i++) { /* in order: the newest key of a slot is set last */
            put32(table + slot_of[i] * 4, (uint32_t)(number + i));
            dirty[slot_of[i] * 4 / 4096] = 1;
        }
        number += count;
        physical_offset = offsets[count - 1];
        slots_done = slots;
    }
    PyBuffer_Release(&view);
    PyBuffer_Release(&dirty_view);
    return Py_BuildValue("(LLLO)", number, slots, physical_offset, Py_None);
fail:
    PyBuffer_Release(&view);
    PyBuffer_Release(&dirty_view);
    {
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        PyErr_NormalizeException(&type, &value, &traceback);
        if (value == NULL) { /* cannot happen: every goto fail has an error set */
            Py_XDECREF(type);
            Py_XDECREF(traceback);
            PyErr_SetString(PyExc_SystemError, "index_put_keys: failed without an error");
            return NULL;
        }
        if (traceback != NULL)
            PyException_SetTraceback(value, traceback);
        /* the chunk that failed counted the slots it would have taken: they were not set */
        PyObject *result = Py_BuildValue("(LLLO)", number, slots_done, physical_offset, value);
        Py_XDECREF(type);
        Py_DECREF(value);
        Py_XDECREF(traceback);
        return result;
    }
}

/* index_newest_slot(slot_table) -> int: the largest of the table's big-endian int32 slots (0 if none
 * is positive). A file opened for writing numbers its next entry past it (IndexFile._open_slots):
 * 5 million slots in Python took 100 ms of the event loop at the first put after a start. */
static PyObject *index_newest_slot(PyObject *module, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *p = view.buf;
    Py_ssize_t n = view.len / 4;
    int32_t newest = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t v = (int32_t)(((uint32_t)p[4 * i] << 24) | ((uint32_t)p[4 * i + 1] << 16) |
                              ((uint32_t)p[4 * i + 2] << 8) | p[4 * i + 3]);
        if (v > newest)
            newest = v;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromLong(newest);
}

static int intern_queue_names(void)
{
    if (s_max_offset != NULL)
        return 0;
    s_max_offset = PyUnicode_InternFromString("max_offset");
    s_queue = PyUnicode_InternFromString("queue");
    s_files = PyUnicode_InternFromString("files");
    s_file_size = PyUnicode_InternFromString("file_size");
    s_file_from_offset = PyUnicode_InternFromString("file_from_offset");
    s_wrote_position = PyUnicode_InternFromString("wrote_position");
    s_mm = PyUnicode_InternFromString("mm");
    s_dirty = PyUnicode_InternFromString("dirty");
    if (!s_max_offset || !s_queue || !s_files || !s_file_size || !s_file_from_offset || !s_wrote_position ||
        !s_mm || !s_dirty)
        return -1;
    return 0;
}

/* --- Reading a record back ----------------------------------------------------------------------
 *
 * Why compiled: every consumed message is read back (decode_record), and the Python decoder cost
 * about a twentieth of the broker's loop thread per consumed message: the header unpack, slices, the
 * properties split and the StoredMessage tuple. Only well-formed records are decoded here; for
 * anything else the function answers None and the Python decoder, the reference, raises the
 * CorruptRecordError that says what is wrong. Hosts and topics repeat on every record: small
 * direct-mapped caches keep their Python objects (bounded: a slot is replaced on a collision).
 */

#define HOST_SLOTS 256
#define TOPIC_SLOTS 256
#define MIN_RECORD (HEADER_SIZE + 2 + 1 + 2)

static struct { uint32_t ip; int32_t port; PyObject *value; } host_slots[HOST_SLOTS];
static struct { PyObject *raw, *value; } topic_slots[TOPIC_SLOTS];

static inline uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t get64(const unsigned char *p) { return (uint64_t)get32(p) << 32 | get32(p + 4); }

/* (dotted IPv4, port) of a record's 4 address bytes and port, new reference */
static PyObject *host_tuple(const unsigned char *p)
{
    uint32_t ip = get32(p);
    int32_t port = (int32_t)get32(p + 4);
    unsigned slot = (ip * 2654435761u ^ (uint32_t)port) % HOST_SLOTS;
    if (host_slots[slot].value != NULL && host_slots[slot].ip == ip && host_slots[slot].port == port) {
        Py_INCREF(host_slots[slot].value);
        return host_slots[slot].value;
    }
    PyObject *value = Py_BuildValue("(Ni)", PyUnicode_FromFormat("%u.%u.%u.%u", p[0], p[1], p[2], p[3]), port);
    if (value == NULL)
        return NULL;
    Py_XSETREF(host_slots[slot].value, Py_NewRef(value));
    host_slots[slot].ip = ip;
    host_slots[slot].port = port;
    return value;
}

/* The topic of ``len`` UTF-8 bytes at ``p``, new reference; NULL without an error when not UTF-8 */
static PyObject *topic_text(const char *p, Py_ssize_t len)
{
    uint32_t h = 2166136261u;
    for (Py_ssize_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)p[i]) * 16777619u;
    unsigned slot = h % TOPIC_SLOTS;
    PyObject *raw = topic_slots[slot].raw;
    if (raw != NULL && PyBytes_GET_SIZE(raw) == len && memcmp(PyBytes_AS_STRING(raw), p, len) == 0) {
        Py_INCREF(topic_slots[slot].value);
        return topic_slots[slot].value;
    }
    PyObject *value = PyUnicode_DecodeUTF8(p, len, "strict");
    if (value == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            PyErr_Clear();
        return NULL;
    }
    PyObject *key = PyBytes_FromStringAndSize(p, len);
    if (key == NULL) {
        Py_DECREF(value);
        return NULL;
    }
    Py_XSETREF(topic_slots[slot].raw, key);
    Py_XSETREF(topic_slots[slot].value, Py_NewRef(value));
    return value;
}

/* name\x01value\x02 pairs into a new dict, as record.decode_properties; NULL without an error when
 * malformed (the Python decoder then says how) */
static PyObject *properties_of(const char *p, Py_ssize_t len)
{
    PyObject *props = PyDict_New();
    if (props == NULL || len == 0)
        return props;
    if (p[len - 1] != '\x02')
        goto malformed;
    const char *end = p + len;
    while (p < end) {
        const char *stop = memchr(p, '\x02', end - p); /* ASCII separators: safe inside UTF-8 */
        const char *mid = memchr(p, '\x01', stop - p);
        if (mid == NULL || mid == p)
            goto malformed;
        PyObject *name = PyUnicode_DecodeUTF8(p, mid - p, "strict");
        if (name == NULL)
            goto undecodable;
        PyUnicode_InternInPlace(&name); /* names repeat on every record */
        PyObject *value = PyUnicode_DecodeUTF8(mid + 1, stop - mid - 1, "strict");
        if (value == NULL) {
            Py_DECREF(name);
            goto undecodable;
        }
        int failed = PyDict_SetItem(props, name, value);
        Py_DECREF(name);
        Py_DECREF(value);
        if (failed < 0) {
            Py_DECREF(props);
            return NULL;
        }
        p = stop + 1;
    }
    return props;
undecodable:
    if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        Py_DECREF(props);
        return NULL;
    }
    PyErr_Clear();
malformed:
    Py_DECREF(props);
    return NULL;
}

/* The record at buf[pos:] (not beyond limit, itself at most the buffer's length) as a new ``type``
 * (a StoredMessage), Py_None when it is not a well-formed message record, NULL on an error. */
static PyObject *decode_at(const unsigned char *buf, Py_ssize_t pos, Py_ssize_t limit, int check_crc,
                           PyTypeObject *type)
{
    PyObject *result = NULL, *body = NULL, *topic = NULL, *props = NULL, *born = NULL, *store = NULL;
    if (!S.configured || pos < 0 || pos + HEADER_SIZE > limit)
        goto fallback;
    const unsigned char *h = buf + pos;
    int32_t total = (int32_t)get32(h), body_len = (int32_t)get32(h + 84);
    if (get32(h + 4) != MESSAGE_MAGIC || total < MIN_RECORD || pos + total > limit || body_len < 0 ||
        HEADER_SIZE + (Py_ssize_t)body_len + 2 > total)
        goto fallback;
    const unsigned char *tail = h + HEADER_SIZE + body_len, *end = h + total;
    Py_ssize_t topic_len = tail[0] << 8 | tail[1];
    if (topic_len == 0 || tail + 2 + topic_len + 2 > end)
        goto fallback;
    const unsigned char *props_at = tail + 2 + topic_len;
    Py_ssize_t props_len = props_at[0] << 8 | props_at[1];
    if (props_at + 2 + props_len != end)
        goto fallback;
    uint32_t crc = get32(h + 8);
    if (check_crc) {
        int failed = 0;
        uint32_t actual;
        if (S.crc32_native != NULL) {
            actual = S.crc32_native(0, h + HEADER_SIZE, (uint32_t)body_len);
        } else {
            body = PyBytes_FromStringAndSize((const char *)h + HEADER_SIZE, body_len);
            if (body == NULL)
                goto done;
            actual = crc32_of(body, &failed);
            if (failed)
                goto done;
        }
        if (actual != crc)
            goto fallback;
    }
    if (body == NULL && (body = PyBytes_FromStringAndSize((const char *)h + HEADER_SIZE, body_len)) == NULL)
        goto done;
    if ((topic = topic_text((const char *)tail + 2, topic_len)) == NULL)
        goto error_or_fallback;
    if ((props = properties_of((const char *)props_at + 2, props_len)) == NULL)
        goto error_or_fallback;
    if ((born = host_tuple(h + 48)) == NULL || (store = host_tuple(h + 64)) == NULL)
        goto done;
    PyObject *fields[16] = {
        topic,
        PyLong_FromLong((int32_t)get32(h + 12)),              /* queue id */
        PyLong_FromLongLong((int64_t)get64(h + 20)),          /* queue offset */
        PyLong_FromLongLong((int64_t)get64(h + 28)),          /* physical offset */
        body,
        props,
        PyLong_FromLongLong((int64_t)get64(h + 56)),          /* store timestamp */
        PyLong_FromLongLong((int64_t)get64(h + 40)),          /* born timestamp */
        born,
        store,
        PyLong_FromLong((int32_t)get32(h + 72)),              /* reconsume times */
        PyLong_FromLong((int32_t)get32(h + 36)),              /* sys flag */
        PyLong_FromLong((int32_t)get32(h + 16)),              /* flag */
        PyLong_FromLongLong((int64_t)get64(h + 76)),          /* prepared transaction offset */
        PyLong_FromLong(total),
        PyLong_FromUnsignedLong(crc),
    };
    topic = body = props = born = store = NULL; /* owned by fields now */
    result = type->tp_alloc(type, 16);
    for (int i = 0; i < 16; i++) {
        if (fields[i] == NULL || result == NULL) {
            Py_CLEAR(result);
            for (int j = 0; j < 16; j++)
                Py_XDECREF(fields[j]);
            goto done;
        }
    }
    for (int i = 0; i < 16; i++)
        PyTuple_SET_ITEM(result, i, fields[i]);
    goto done;
error_or_fallback:
    if (PyErr_Occurred())
        goto done;
fallback:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(body);
    Py_XDECREF(topic);
    Py_XDECREF(props);
    Py_XDECREF(born);
    Py_XDECREF(store);
    return result;
}

/* decode_record(buf, pos, limit, check_crc, stored_type) -> StoredMessage, or None (see above) */
static PyObject *decode_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyType_Check(args[4]) || !PyType_IsSubtype((PyTypeObject *)args[4], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "decode_record(buf, pos, limit, check_crc, stored_type)");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]), limit = PyLong_AsSsize_t(args[2]);
    int check_crc = PyObject_IsTrue(args[3]);
    if (PyErr_Occurred() || check_crc < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL; /* a closed mmap: ValueError, as the Python decoder raises */
    PyObject *result = decode_at(view.buf, pos, limit < view.len ? limit : view.len, check_crc,
                                 (PyTypeObject *)args[4]);
    PyBuffer_Release(&view);
    return result;
}

/* The segment of a CommitLog read by read_run: its mapping's buffer while held, and its bounds. */
typedef struct {
    PyObject *file; /* borrowed from the files list */
    Py_buffer view;
    int held;
    long long from, wrote;
} Segment;

static void segment_release(Segment *seg)
{
    if (seg->held)
        PyBuffer_Release(&seg->view);
    seg->held = 0;
    seg->file = NULL;
}

/* Point ``seg`` at ``file`` (a MappedFile): its mm's buffer, file_from_offset and wrote_position;
 * 0 when it cannot be read here (closed by retention meanwhile: the caller stops, Python says why). */
static int segment_hold(Segment *seg, PyObject *file)
{
    if (seg->file == file)
        return 1;
    segment_release(seg);
    PyObject *mm = PyObject_GetAttrString(file, "mm");
    PyObject *from = mm ? PyObject_GetAttrString(file, "file_from_offset") : NULL;
    PyObject *wrote = from ? PyObject_GetAttrString(file, "wrote_position") : NULL;
    int ok = wrote != NULL;
    if (ok) {
        seg->from = PyLong_AsLongLong(from);
        seg->wrote = PyLong_AsLongLong(wrote);
        ok = !PyErr_Occurred() && PyObject_GetBuffer(mm, &seg->view, PyBUF_SIMPLE) == 0;
    }
    Py_XDECREF(mm);
    Py_XDECREF(from);
    Py_XDECREF(wrote);
    if (!ok) {
        PyErr_Clear();
        return 0;
    }
    seg->held = 1;
    seg->file = file;
    if (seg->wrote > seg->view.len)
        seg->wrote = seg->view.len;
    return 1;
}

/* read_run(raw, files, file_size, check_crc, corrupt, topic, queue_id, first_offset, max_count,
 *          max_bytes, total_bytes, messages, stored_type) -> (entries taken, total bytes)
 * StoreReader.get_messages' loop for its usual run, with no tag filter and the local CommitLog:
 * the ConsumeQueue entries ``raw`` from queue offset ``first_offset``, each record read from its
 * segment of ``files`` (the CommitLog's MappedFiles of ``file_size`` bytes), decoded (its body CRC
 * checked when ``check_crc`` or its offset is in the set ``corrupt``) and appended to ``messages``,
 * until ``max_count`` messages are there or the next one would pass ``max_bytes`` (``total_bytes``
 * counted so far). It stops short, before the entry, at anything else: an empty entry, a record
 * not found or not well formed, or one that is not this queue's entry; the Python loop goes on from
 * there and says what is wrong. */
static PyObject *read_run(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    /* hashes and tags: a tag filter (both sets, or both None): entries whose tag hash is not in
       hashes are passed over unread, records whose TAGS is not in tags read and passed over */
    PyObject *hashes = nargs == 15 ? args[13] : Py_None, *tags = nargs == 15 ? args[14] : Py_None;
    if ((nargs != 13 && nargs != 15) || !PyBytes_Check(args[0]) || !PyList_Check(args[1]) ||
        !PyAnySet_Check(args[4]) || !PyUnicode_Check(args[5]) || !PyList_Check(args[11]) ||
        !PyType_Check(args[12]) || !PyType_IsSubtype((PyTypeObject *)args[12], &PyTuple_Type) ||
        (hashes == Py_None) != (tags == Py_None) || (hashes != Py_None && !PyAnySet_Check(hashes)) ||
        (tags != Py_None && !PyAnySet_Check(tags))) {
        PyErr_SetString(PyExc_TypeError, "read_run(raw: bytes, files: list, file_size, check_crc, corrupt: set, "
                                         "topic: str, queue_id, first_offset, max_count, max_bytes, "
                                         "total_bytes, messages: list, stored_type[, hashes: set, tags: set])");
        return NULL;
    }
    if (tags != Py_None && S.s_tags == NULL && (S.s_tags = PyUnicode_InternFromString("TAGS")) == NULL)
        return NULL;
    PyObject *files = args[1], *corrupt = args[4], *topic = args[5], *messages = args[11];
    PyTypeObject *type = (PyTypeObject *)args[12];
    long long file_size = PyLong_AsLongLong(args[2]), queue_id = PyLong_AsLongLong(args[6]);
    long long first_offset = PyLong_AsLongLong(args[7]), max_count = PyLong_AsLongLong(args[8]);
    long long max_bytes = PyLong_AsLongLong(args[9]), total = PyLong_AsLongLong(args[10]);
    int check_crc = PyObject_IsTrue(args[3]);
    if (PyErr_Occurred() || check_crc < 0)
        return NULL;
    if (file_size <= 0) {
        PyErr_SetString(PyExc_ValueError, "read_run: file_size must be positive");
        return NULL;
    }
    const unsigned char *raw = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t count = PyBytes_GET_SIZE(args[0]) / CQ_ENTRY_SIZE, taken = 0;
    Py_ssize_t nfiles = PyList_GET_SIZE(files);
    Segment seg = {NULL, {0}, 0, 0, 0};
    long long base = 0;
    if (nfiles > 0) {
        PyObject *from = PyObject_GetAttrString(PyList_GET_ITEM(files, 0), "file_from_offset");
        if (from == NULL)
            return NULL;
        base = PyLong_AsLongLong(from);
        Py_DECREF(from);
        if (base == -1 && PyErr_Occurred())
            return NULL;
    }
    for (; taken < count && PyList_GET_SIZE(messages) < max_count; taken++) {
        const unsigned char *e = raw + taken * CQ_ENTRY_SIZE;
        long long phys = (long long)get64(e);
        int32_t size = (int32_t)get32(e + 8);
        if (size <= 0)
            break;
        if (hashes != Py_None) { /* as the loop: another tag's entry is passed over unread */
            PyObject *hash = PyLong_FromLongLong((long long)get64(e + 12));
            int wanted = hash == NULL ? -1 : PySet_Contains(hashes, hash);
            Py_XDECREF(hash);
            if (wanted < 0)
                goto error;
            if (!wanted)
                continue;
        }
        if ((PyList_GET_SIZE(messages) > 0 && total + size > max_bytes) || phys < base)
            break;
        long long index = (phys - base) / file_size;
        if (index >= nfiles || !segment_hold(&seg, PyList_GET_ITEM(files, index)))
            break;
        if (phys < seg.from || phys >= seg.from + file_size)
            break;
        int check = check_crc;
        if (!check && PySet_GET_SIZE(corrupt) > 0) {
            PyObject *key = PyLong_FromLongLong(phys);
            check = key == NULL ? -1 : PySet_Contains(corrupt, key);
            Py_XDECREF(key);
            if (check < 0)
                goto error;
        }
        PyObject *msg = decode_at(seg.view.buf, phys - seg.from, seg.wrote, check, type);
        if (msg == NULL)
            goto error;
        if (msg == Py_None) {
            Py_DECREF(msg);
            break;
        }
        long long got_phys = PyLong_AsLongLong(PyTuple_GET_ITEM(msg, 3));
        long long got_offset = PyLong_AsLongLong(PyTuple_GET_ITEM(msg, 2));
        long long got_queue = PyLong_AsLongLong(PyTuple_GET_ITEM(msg, 1));
        int same_topic = PyUnicode_Compare(PyTuple_GET_ITEM(msg, 0), topic) == 0;
        if (PyErr_Occurred()) {
            Py_DECREF(msg);
            goto error;
        }
        if (got_phys != phys || got_offset != first_offset + taken || got_queue != queue_id || !same_topic) {
            Py_DECREF(msg);
            break;
        }
        if (tags != Py_None) { /* the exact tag, as the loop checks it after a hash matched */
            PyObject *properties = PyTuple_GET_ITEM(msg, 5);
            PyObject *tag = PyDict_Check(properties) ? PyDict_GetItemWithError(properties, S.s_tags) : NULL;
            int wanted = tag == NULL ? (PyErr_Occurred() ? -1 : 0) : PySet_Contains(tags, tag);
            if (wanted <= 0) {
                Py_DECREF(msg);
                if (wanted < 0)
                    goto error;
                continue;
            }
        }
        int failed = PyList_Append(messages, msg);
        Py_DECREF(msg);
        if (failed < 0)
            goto error;
        total += size;
    }
    segment_release(&seg);
    return Py_BuildValue("(nL)", taken, total);
error:
    segment_release(&seg);
    return NULL;
}

static PyObject *crc32_source(PyObject *module, PyObject *unused)
{
    return PyUnicode_FromString(S.crc32_native != NULL ? "native" : "python");
}

static PyMethodDef methods[] = {
    {"crc32_source", crc32_source, METH_NOARGS,
     "'native' when body CRCs call zlib-ng's C function directly, else 'python' (crc32_fn)."},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "Hand over the Python types, errors, caches and CRC function the encoder uses."},
    {"write_queue_runs", (PyCFunction)(void (*)(void))write_queue_runs, METH_FASTCALL,
     "write_queue_runs(queue_runs, queues, put) -> {(topic, queue id): new max offset}; each run into "
     "its ConsumeQueue, through put(key, first, entries) when not the usual case."},
    {"advance_queue_offsets", (PyCFunction)(void (*)(void))advance_queue_offsets, METH_FASTCALL,
     "advance_queue_offsets(queue_runs, offsets): offsets[key] = first + entries, per run."},
    {"index_items", index_items, METH_O,
     "index_items(requests) -> [(key, physical offset)]: the index keys of (topic, KEYS, UNIQ_KEY, "
     "offset) requests, as IndexService.put_batch makes them."},
    {"index_newest_slot", (PyCFunction)index_newest_slot, METH_O,
     "index_newest_slot(slot_table) -> int: the largest big-endian int32 slot (0 if none is positive)."},
    {"index_put_keys", (PyCFunction)(void (*)(void))index_put_keys, METH_FASTCALL,
     "index_put_keys(slot_table, dirty, tail, items, start, end, slot_num, number, slots, diff, "
     "physical_offset) "
     "-> (number, slots, last physical offset, error or None); IndexFile.put_keys' loop."},
    {"decode_record", (PyCFunction)(void (*)(void))decode_record, METH_FASTCALL,
     "decode_record(buf, pos, limit, check_crc, stored_type) -> the record at buf[pos:] as stored_type, "
     "or None when it is not a well-formed message record (record.decode_record then says why)."},
    {"read_run", (PyCFunction)(void (*)(void))read_run, METH_FASTCALL,
     "read_run(raw, files, file_size, check_crc, corrupt, topic, queue_id, first_offset, max_count, "
     "max_bytes, total_bytes, messages, stored_type[, hashes, tags]) -> (entries taken, total bytes); "
     "StoreReader.get_messages' usual run (with a tag filter: hashes and tags), stopping short at "
     "anything else."},
    {"encode_batch", (PyCFunction)(void (*)(void))encode_batch, METH_FASTCALL,
     "encode_batch(msgs, start, physical_offset, space, store_timestamp, store_host, queue_offsets, "
     "max_message_size, msg_id_prefix) -> BatchEncoding; see record.encode_batch."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_record_codec", "Compiled CommitLog batch encoder (see record.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__record_codec(void)
{
    if (intern_queue_names() < 0)
        return NULL;
    return PyModule_Create(&module_def);
}
