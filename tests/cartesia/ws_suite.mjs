// ws_suite.mjs — `gepard serve`'s Cartesia WebSocket (/tts/websocket)
// driven by the `ws` client (npm, pinned in package.json; Cartesia's SDK
// always connects with wss://, so it needs TLS in front of the server and
// is not used here) with Cartesia's messages: a context's transcript in
// pieces (continue), flush and flush_done, two contexts at once, cancel,
// pings, the key in the query and in a header, and the error events. Run by
// tests/test_server_cartesia.c on the tiny fixture model.
//
//   node ws_suite.mjs BASE_URL API_KEY OUT_DIR
//
// Prints one JSON line per check: {"check": NAME, "ok": BOOL, "info": TEXT}.
import WebSocket from 'ws';
import { check, must } from './checks.mjs';

const [base, apiKey] = process.argv.slice(2);
const wsURL = base.replace(/^http/, 'ws') + '/tts/websocket';
const FRAMES = 10; // per utterance: fixed-length greedy sampling below
const SAMPLES = FRAMES * 1024;
const fmt = { container: 'raw', encoding: 'pcm_s16le', sample_rate: 22050 };
const request = (context_id, transcript, extra = {}) => ({
  model_id: 'sonic-3',
  voice: { mode: 'id', id: 'alloy' },
  output_format: fmt,
  context_id,
  transcript,
  top_k: 1,
  seed: 5,
  stop_threshold: 2,
  max_frames: FRAMES,
  ...extra,
});

// A connection whose events are collected; `until(pred)` waits for one.
function connect(url = `${wsURL}?api_key=${apiKey}`, options = {}) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, options);
    const events = [];
    let waiters = [];
    ws.on('message', (m) => {
      const e = JSON.parse(m.toString());
      if (e.type === 'chunk') e.bytes = Buffer.from(e.data, 'base64').length;
      events.push(e);
      waiters = waiters.filter((w) => !w());
    });
    ws.on('close', (code) => {
      ws.closeCode = code;
      waiters = waiters.filter((w) => !w());
    });
    ws.on('open', () =>
      resolve({
        ws,
        events,
        send: (msg) => ws.send(JSON.stringify(msg)),
        until: (pred, ms = 30000) =>
          new Promise((res, rej) => {
            const t = setTimeout(() => rej(new Error(`timed out; events: ${JSON.stringify(events.map((e) => e.type + ':' + (e.context_id ?? '')))}`)), ms);
            const w = () => {
              const hit = events.find(pred) || (pred.closed && ws.closeCode !== undefined);
              if (hit) {
                clearTimeout(t);
                res(hit);
              }
              return !!hit;
            };
            if (!w()) waiters.push(w);
          }),
      }),
    );
    ws.on('error', reject);
  });
}

const samplesOf = (events, id) =>
  events.filter((e) => e.type === 'chunk' && e.context_id === id).reduce((n, e) => n + e.bytes / 2, 0);

await check('ws_pieces_flush_and_done', async () => {
  const c = await connect();
  c.send(request('a', 'Hello there. How ', { continue: true }));
  c.send(request('a', 'are you today', { continue: true }));
  c.send(request('a', '?', { continue: true, flush: true }));
  const flushed = await c.until((e) => e.type === 'flush_done');
  must(flushed.flush_id === 1 && flushed.context_id === 'a', JSON.stringify(flushed));
  // everything before the flush: two sentences, two utterances of FRAMES frames
  const before = samplesOf(c.events, 'a');
  must(before === 2 * SAMPLES, `${before} samples before flush_done, want ${2 * SAMPLES}`);
  const tagged = c.events.filter((e) => e.type === 'chunk' && e.flush_id === 1);
  must(tagged.length > 0, 'no chunk carried flush_id 1');
  c.send(request('a', ' Bye', { continue: false }));
  const done = await c.until((e) => e.type === 'done');
  must(done.done === true && done.context_id === 'a', JSON.stringify(done));
  const total = samplesOf(c.events, 'a');
  must(total === 3 * SAMPLES, `${total} samples, want ${3 * SAMPLES}`);
  // order: chunk... flush_done chunk... done
  const order = c.events.map((e) => e.type).join(',');
  must(order.indexOf('flush_done') < order.lastIndexOf('chunk') && order.endsWith('done'), order);
  c.ws.close();
  return `${c.events.length} events, ${total} samples in 3 utterances`;
});

await check('ws_unfinished_sentence_waits', async () => {
  const c = await connect();
  c.send(request('w', 'An unfinished', { continue: true }));
  await new Promise((r) => setTimeout(r, 500));
  must(c.events.length === 0, `spoke before the sentence ended: ${JSON.stringify(c.events).slice(0, 200)}`);
  c.send(request('w', ' sentence.', { continue: true }));
  await c.until((e) => e.type === 'chunk');
  c.send(request('w', '', { continue: false }));
  await c.until((e) => e.type === 'done');
  const n = samplesOf(c.events, 'w');
  must(n === SAMPLES, `${n} samples`);
  c.ws.close();
  return 'nothing until the sentence ended, then one utterance';
});

// max_buffer_delay_ms: an unfinished sentence is spoken (to its last
// space) once it has waited that long.
await check('ws_buffer_delay', async () => {
  const c = await connect();
  const t0 = Date.now();
  c.send(request('d', 'An unfinished thought with no end ', { continue: true, max_buffer_delay_ms: 300 }));
  await c.until((e) => e.type === 'chunk' && e.context_id === 'd', 5000);
  const waited = Date.now() - t0;
  must(waited >= 250, `spoke after ${waited} ms, before its 300-ms delay`);
  c.send(request('d', 'in sight', { continue: false }));
  await c.until((e) => e.type === 'done' && e.context_id === 'd');
  const n = samplesOf(c.events, 'd');
  must(n === 2 * SAMPLES, `${n} samples: want two pieces`);
  c.ws.close();
  return `the fragment went after ${waited} ms; two pieces`;
});

await check('ws_two_contexts_and_cancel', async () => {
  const c = await connect();
  c.send(request('x', 'First context speaks.', { continue: false, max_frames: 2000 }));
  c.send(request('y', 'Second context speaks.', { continue: false }));
  await c.until((e) => e.type === 'done' && e.context_id === 'y');
  c.send({ context_id: 'x', cancel: true });
  c.send(request('z', 'After the cancel.', { continue: false }));
  await c.until((e) => e.type === 'done' && e.context_id === 'z');
  await new Promise((r) => setTimeout(r, 300));
  must(!c.events.some((e) => e.type === 'done' && e.context_id === 'x'), 'the cancelled context finished');
  const y = samplesOf(c.events, 'y');
  must(y === SAMPLES, `context y: ${y} samples`);
  c.ws.close();
  return `x cancelled after ${samplesOf(c.events, 'x')} samples; y and z whole`;
});

await check('ws_mulaw_8k_and_ping', async () => {
  const c = await connect();
  const pong = new Promise((r) => c.ws.once('pong', (d) => r(d.toString())));
  c.ws.ping('are you there');
  must((await pong) === 'are you there', 'no pong');
  c.send(request('m', 'Telephone.', { output_format: { container: 'raw', encoding: 'pcm_mulaw', sample_rate: 8000 } }));
  await c.until((e) => e.type === 'done');
  const bytes = c.events.filter((e) => e.type === 'chunk').reduce((n, e) => n + e.bytes, 0);
  const want = (SAMPLES * 8000) / 22050;
  must(Math.abs(bytes - want) <= 400, `${bytes} bytes of mu-law, want ~${want}`);
  c.ws.close();
  return `${bytes} bytes at 8 kHz`;
});

await check('ws_error_events', async () => {
  const c = await connect(wsURL, { headers: { Authorization: `Bearer ${apiKey}` } });
  c.send({ transcript: 'no context' });
  const e1 = await c.until((e) => e.type === 'error' && !e.context_id);
  must('context_id' in e1 && e1.context_id === null, JSON.stringify(e1)); // clients index the key
  c.send(request('bad', 'Hi.', { output_format: { container: 'wav', encoding: 'pcm_s16le', sample_rate: 22050 } }));
  const e2 = await c.until((e) => e.type === 'error' && e.context_id === 'bad');
  c.send(request('t', 'Hi.', { add_phoneme_timestamps: true }));
  const e3 = await c.until((e) => e.type === 'error' && e.context_id === 't');
  c.send(request('end', 'Done.', { continue: false }));
  await c.until((e) => e.type === 'done' && e.context_id === 'end');
  c.send(request('end2', 'Once.', { continue: false, max_frames: 400 }));
  c.send(request('end2', 'Twice.', { continue: false }));
  const e4 = await c.until((e) => e.type === 'error' && e.context_id === 'end2');
  c.ws.send('not json');
  const e5 = await c.until((e) => e.type === 'error' && e.error_code === 'invalid_json');
  must(e1.status_code === 400 && e2.status_code === 400 && e3.error_code === 'unsupported_feature', JSON.stringify([e1, e2, e3]));
  must(e4.error_code === 'context_ended' && e5.done === true, JSON.stringify([e4, e5]));
  c.ws.send(Buffer.from([1, 2, 3])); // binary: messages are JSON text
  const e6 = await c.until((e) => e.type === 'error' && e.error_code === 'invalid_message');
  c.send(request('slow', 'Hi.', { continue: true, max_buffer_delay_ms: 9000 }));
  const e7 = await c.until((e) => e.type === 'error' && e.context_id === 'slow');
  must(e7.error_code === 'invalid_value' && /max_buffer_delay_ms/.test(e7.message), JSON.stringify(e7));
  // 32 contexts a connection: the 33rd is refused
  // (contexts still open from above count too; these stay open: continue)
  for (let i = 0; i < 33; i++) c.send(request(`many${i}`, 'Open.', { continue: true }));
  const e8 = await c.until((e) => e.type === 'error' && e.error_code === 'too_many_contexts');
  must(e8.context_id.startsWith('many') && e8.status_code === 429 && e6.done === true, JSON.stringify([e6, e8]));
  c.ws.close();
  return [e1, e2, e3, e4].map((e) => e.message).join(' | ');
});

// add_timestamps (what voice-agent frameworks send): estimated word times
// after each piece's audio, counting from the context's start.
await check('ws_word_timestamps', async () => {
  const c = await connect();
  c.send(request('ts', 'First words here. ', { continue: true, add_timestamps: true }));
  c.send(request('ts', 'And then some more.', { continue: false, add_timestamps: true }));
  await c.until((e) => e.type === 'done' && e.context_id === 'ts');
  const ts = c.events.filter((e) => e.type === 'timestamps');
  must(ts.length === 2 && ts.every((e) => e.estimated === true && e.context_id === 'ts'), JSON.stringify(ts));
  const words = ts.flatMap((e) => e.word_timestamps.words);
  must(words.join(' ') === 'First words here. And then some more.', words.join(' '));
  const starts = ts.flatMap((e) => e.word_timestamps.start), ends = ts.flatMap((e) => e.word_timestamps.end);
  for (let i = 0; i < starts.length; i++) {
    must(starts[i] < ends[i] && (i === 0 || starts[i] >= ends[i - 1] - 1e-3), `word ${i}: ${starts[i]}-${ends[i]}`);
  }
  const seconds = samplesOf(c.events, 'ts') / 22050;
  must(ts[1].word_timestamps.start[0] >= SAMPLES / 22050 - 1e-3, `the second piece starts at ${ts[1].word_timestamps.start[0]}`);
  must(ends[ends.length - 1] <= seconds + 1e-3, `the last word ends at ${ends[ends.length - 1]} of ${seconds} s`);
  // each piece's times come after its audio
  const order = c.events.map((e) => e.type);
  must(order.indexOf('timestamps') > order.indexOf('chunk'), order.join(','));
  c.ws.close();
  return `${words.length} words over ${seconds.toFixed(3)} s, last ${starts[starts.length - 1]}-${ends[ends.length - 1]}`;
});

await check('ws_wrong_key_refused', async () => {
  try {
    await connect(`${wsURL}?api_key=wrong`);
  } catch (e) {
    must(/401/.test(e.message), e.message);
    return e.message;
  }
  throw new Error('a wrong key was let in');
});
