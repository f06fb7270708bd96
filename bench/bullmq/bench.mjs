// BullMQ 5 as the seed configuration that motivated hookgate's sender:
// attempts 5, exponential backoff 2s with jitter 0.5, removeOnComplete
// 1000. N jobs of a 500-byte payload are queued (Redis memory read before
// and after), then C concurrent workers POST each payload to the receiver.
//
//   node bench.mjs <redis host:port> <receiver URL> <n> <c>
import { Queue, Worker } from 'bullmq';

const [hostport, receiver, nArg, cArg] = process.argv.slice(2);
const [host, port] = hostport.split(':');
const connection = { host, port: Number(port) };
const n = Number(nArg || 20000), c = Number(cArg || 20);
const name = 'bench' + Date.now();
const queue = new Queue(name, { connection });
const client = await queue.client;

async function usedMemory() {
  const info = await client.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)[1]);
}
async function count() {
  const res = await fetch(receiver + '/count');
  return Number(await res.text());
}

await fetch(receiver + '/count', { method: 'DELETE' });
const payload = { type: 'reservation.confirmed', data: 'x'.repeat(500 - 44) };
const opts = { attempts: 5, backoff: { type: 'exponential', delay: 2000, jitter: 0.5 }, removeOnComplete: 1000 };
const before = await usedMemory();
for (let i = 0; i < n; i += 1000) {
  const jobs = [];
  for (let j = i; j < Math.min(n, i + 1000); j++) {
    jobs.push({ name: 'webhook', data: payload, opts: { ...opts, jobId: 'evt_' + j } });
  }
  await queue.addBulk(jobs);
}
const after = await usedMemory();

const start = Date.now();
const worker = new Worker(name, async (job) => {
  const res = await fetch(receiver + '/hooks', {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(job.data),
  });
  await res.arrayBuffer();
  if (res.status >= 300) throw new Error('status ' + res.status);
}, { connection, concurrency: c });
while ((await count()) < n) {
  await new Promise((r) => setTimeout(r, 5));
}
const elapsed = (Date.now() - start) / 1000;
await worker.close();
await queue.obliterate({ force: true });
await queue.close();
console.log(`bullmq deliveries/s ${(n / elapsed).toFixed(0)} bytes/envelope ${((after - before) / n).toFixed(0)}`);
process.exit(0);
