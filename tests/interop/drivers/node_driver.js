// Drive the official RocketMQ 5 Node.js client (npm rocketmq-client-nodejs) against a broker.
// Prints one JSON object on the last stdout line.
//   node node_driver.js produce|simple|push|slow-push|redeliver|fifo-produce|delay-produce|tx-produce
//        --endpoint H:P --namespace NS --topic T --group G --count N --prefix P [--invisible S]
//        [--timeout S] [--delay S] [--ak AK --sk SK] [--tls 1]
'use strict';
const { Producer, SimpleConsumer, PushConsumer, ConsumeResult } = require('rocketmq-client-nodejs');

const silent = { info() {}, warn() {}, error() {}, debug() {}, log() {} };

function parse(argv) {
  const a = { mode: argv[0], namespace: '', group: '', count: 10, prefix: 'node', invisible: 3, timeout: 30,
    delay: 5 };
  for (let i = 1; i < argv.length; i += 2) a[argv[i].replace(/^--/, '')] = argv[i + 1];
  for (const k of ['count', 'invisible', 'timeout', 'delay']) a[k] = Number(a[k]);
  return a;
}

function view(m) {
  return {
    message_id: m.messageId,
    body: m.body.toString(),
    tag: m.tag === undefined ? null : m.tag,
    keys: [...(m.keys || [])].sort(),
    properties: Object.fromEntries(m.properties || new Map()),
    delivery_attempt: m.deliveryAttempt,
    corrupted: !!m.corrupted,
    message_group: m.messageGroup === undefined ? null : m.messageGroup,
    received_at: Date.now() / 1000,
  };
}

function opts(a, extra) {
  const o = { endpoints: a.endpoint, namespace: a.namespace, requestTimeout: 5000, logger: silent, ...extra };
  if (a.ak) o.sessionCredentials = { accessKey: a.ak, accessSecret: a.sk };
  if (a.tls === '1') o.sslEnabled = true;
  return o;
}

const sleep = ms => new Promise(r => setTimeout(r, ms));

async function produce(a) {
  const p = new Producer(opts(a, { topics: [a.topic] }));
  await p.startup();
  const sent = [];
  try {
    for (let i = 0; i < a.count; i++) {
      const body = `${a.prefix}-${i}`;
      const keys = [`${a.prefix}-k${i}`, `${a.prefix}-kk${i}`];
      const properties = new Map([['idx', String(i)], ['origin', 'node']]);
      const r = await p.send({ topic: a.topic, body: Buffer.from(body), tag: `tag${i % 3}`, keys, properties });
      sent.push({ message_id: r.messageId, body, tag: `tag${i % 3}`, keys: keys.sort(),
        properties: Object.fromEntries(properties) });
    }
  } finally {
    await p.shutdown();
  }
  return { sent };
}

function simpleConsumer(a) {
  return new SimpleConsumer(opts(a, { consumerGroup: a.group, subscriptions: new Map([[a.topic, '*']]),
    awaitDuration: 3000 }));
}

async function simple(a) {
  const c = simpleConsumer(a);
  await c.startup();
  const got = [];
  const deadline = Date.now() + a.timeout * 1000;
  try {
    while (got.length < a.count && Date.now() < deadline) {
      for (const m of await c.receive(16, 15000)) {
        await c.ack(m);
        got.push(view(m));
      }
    }
  } finally {
    await c.shutdown();
  }
  return { received: got };
}

async function redeliver(a) {
  const c = simpleConsumer(a);
  await c.startup();
  const first = [];
  const second = [];
  const deadline = Date.now() + a.timeout * 1000;
  try {
    while (first.length < a.count && Date.now() < deadline) {
      for (const m of await c.receive(16, a.invisible * 1000)) first.push(view(m));
    }
    const t0 = Date.now();
    while (second.length < first.length && Date.now() < deadline) {
      for (const m of await c.receive(16, 15000)) {
        await c.ack(m);
        second.push({ ...view(m), after_s: (Date.now() - t0) / 1000 });
      }
    }
  } finally {
    await c.shutdown();
  }
  return { first, second };
}

// A PushConsumer until --count deliveries (or --timeout), then settleMs more; each delivery recorded
// (taking takeMs over it first: a message given again while its listener runs shows up twice).
async function pushRun(a, takeMs, settleMs) {
  const got = [];
  const c = new PushConsumer(opts(a, {
    consumerGroup: a.group, subscriptions: new Map([[a.topic, '*']]),
    messageListener: {
      async consume(m) { got.push(view(m)); if (takeMs) await sleep(takeMs); return ConsumeResult.SUCCESS; },
    },
  }));
  await c.startup();
  const deadline = Date.now() + a.timeout * 1000;
  try {
    while (got.length < a.count && Date.now() < deadline) await sleep(200);
    await sleep(settleMs);
  } finally {
    await c.shutdown();
  }
  return { received: got };
}

const push = a => pushRun(a, 0, 1500);
// the listener takes --delay s per message; after the last the listeners finish and ack
const slowPush = a => pushRun(a, a.delay * 1000, a.delay * 2000 + 1500);

async function fifoProduce(a) {
  // count messages over three message groups, in order within each group
  const p = new Producer(opts(a, { topics: [a.topic] }));
  await p.startup();
  const sent = [];
  try {
    for (let i = 0; i < a.count; i++) {
      const group = `${a.prefix}-g${i % 3}`;
      const seq = Math.floor(i / 3);
      const r = await p.send({ topic: a.topic, body: Buffer.from(`${group}-${seq}`), messageGroup: group });
      sent.push({ message_id: r.messageId, message_group: group, seq });
    }
  } finally {
    await p.shutdown();
  }
  return { sent };
}

async function delayProduce(a) {
  // count messages due --delay seconds from now (a whole second, as the Python driver)
  const p = new Producer(opts(a, { topics: [a.topic] }));
  await p.startup();
  const sent = [];
  try {
    const due = Math.floor(Date.now() / 1000) + Math.floor(a.delay);
    for (let i = 0; i < a.count; i++) {
      const r = await p.send({ topic: a.topic, body: Buffer.from(`${a.prefix}-${i}`),
        deliveryTimestamp: new Date(due * 1000) });
      sent.push({ message_id: r.messageId, due });
    }
  } finally {
    await p.shutdown();
  }
  return { sent };
}

const COMMIT = 1;
const ROLLBACK = 2;

async function txProduce(a) {
  // transactions ended by the client (commit, rollback) and left open for the broker's check-back
  const asked = [];
  const checker = {
    async check(m) {
      asked.push(m.messageId);
      return m.properties.get('decision') === 'check-commit' ? COMMIT : ROLLBACK;
    },
  };
  const p = new Producer(opts(a, { topics: [a.topic], checker }));
  await p.startup();
  const sent = [];
  try {
    for (let i = 0; i < a.count; i++) {
      const decision = [ 'commit', 'rollback', 'check-commit', 'check-rollback' ][i % 4];
      const tx = p.beginTransaction();
      const r = await p.send({ topic: a.topic, body: Buffer.from(`${a.prefix}-${i}`),
        properties: new Map([[ 'decision', decision ]]) }, tx);
      if (decision === 'commit') await tx.commit();
      else if (decision === 'rollback') await tx.rollback();
      sent.push({ message_id: r.messageId, decision });
    }
    const open = sent.filter(x => x.decision.startsWith('check')).map(x => x.message_id);
    const deadline = Date.now() + a.timeout * 1000;
    while (Date.now() < deadline && !open.every(id => asked.includes(id))) await sleep(200);
    await sleep(1000); // let the last answers go out
  } finally {
    await p.shutdown();
  }
  return { sent, asked: [...new Set(asked)].sort() };
}

const a = parse(process.argv.slice(2));
const modes = { produce, simple, push, 'slow-push': slowPush, redeliver, 'fifo-produce': fifoProduce, 'delay-produce': delayProduce,
  'tx-produce': txProduce };
modes[a.mode](a).then(r => {
  process.stdout.write(JSON.stringify(r) + '\n');
  process.exit(0);
}, e => {
  process.stderr.write(String(e && e.stack || e) + '\n');
  process.exit(1);
});
