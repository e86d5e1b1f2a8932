// The RabbitMQ consumer of the project's source material, as its users run it: Node.js with
// amqplib (pinned by scripts/stack, `DLQCTL_AMQPLIB_NODE_PATH`). Its routing logic is the
// material's, unmodified: a message that does not parse (a SyntaxError) is poison and goes to
// the dead-letter queue at once, with 0 retries; any other failure is retried 3 times, 5 s
// apart, by publishing the message back to the queue with `x-retry-count` one higher, and then
// goes to the dead-letter queue. On the way there it sets `x-retry-count`,
// `x-failure-reason` (the error's message) and `x-original-queue` — no timestamp, no class.
//
// Used by tests/envelope_amqplib.rs: QUEUE and DLQ name the queues, AMQP_URL the broker; the
// downstream is unavailable for the whole run. Prints `ready` once it consumes.
'use strict';

const amqp = require('amqplib');

const QUEUE = process.env.QUEUE;
const DLQ = process.env.DLQ;
const MAX_RETRIES = 3;
const RETRY_DELAY_MS = 5000;

async function processOrder(order) {
  // The order service the consumer calls is down.
  throw new Error('downstream unavailable');
}

async function main() {
  const conn = await amqp.connect(process.env.AMQP_URL);
  const ch = await conn.createConfirmChannel();
  await ch.prefetch(10);

  const publish = (queue, msg, headers) =>
    new Promise((resolve, reject) => {
      ch.sendToQueue(queue, msg.content, {
        headers,
        messageId: msg.properties.messageId,
        contentType: msg.properties.contentType,
        persistent: true,
      }, (err) => (err ? reject(err) : resolve()));
    });

  await ch.consume(QUEUE, async (msg) => {
    if (msg === null) return;
    const headers = msg.properties.headers || {};
    const retryCount = Number(headers['x-retry-count'] || 0);
    try {
      const order = JSON.parse(msg.content.toString());
      await processOrder(order);
      ch.ack(msg);
    } catch (err) {
      const poison = err instanceof SyntaxError;
      if (!poison && retryCount < MAX_RETRIES) {
        setTimeout(async () => {
          await publish(QUEUE, msg, { ...headers, 'x-retry-count': retryCount + 1 });
          ch.ack(msg);
        }, RETRY_DELAY_MS);
        return;
      }
      await publish(DLQ, msg, {
        ...headers,
        'x-retry-count': retryCount,
        'x-failure-reason': err.message,
        'x-original-queue': QUEUE,
      });
      ch.ack(msg);
    }
  }, { noAck: false });
  console.log('ready');
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
