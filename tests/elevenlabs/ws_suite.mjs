// ws_suite.mjs — `gepard serve`'s ElevenLabs WebSockets
// (/v1/text-to-speech/{voice_id}/stream-input and /multi-stream-input)
// driven by the `ws` client (npm, pinned in package.json) with the messages
// ElevenLabs' clients send (Pipecat's and LiveKit's services among them):
// the initial " ", text in pieces, flush, the closing "", the key in the
// first message, contexts with close_context and close_socket, keep-alives,
// and the refusals. Run by tests/test_server_elevenlabs.c on the tiny
// fixture model.
//
//   node ws_suite.mjs BASE_URL API_KEY OUT_DIR
//
// Prints one JSON line per check: {"check": NAME, "ok": BOOL, "info": TEXT}.
import WebSocket from 'ws';
import { check, must } from '../cartesia/checks.mjs';

const [base, apiKey] = process.argv.slice(2);
const wsBase = base.replace(/^http/, 'ws') + '/v1/text-to-speech';
const FRAMES = 10; // per utterance: Gepard's fixed-length greedy sampling below
const BYTES = FRAMES * 1024 * 2; // pcm_22050
const fixed = { top_k: 1, seed: 5, stop_threshold: 2, max_frames: FRAMES };
const query = '?model_id=eleven_flash_v2_5&output_format=pcm_22050';

// A socket whose messages are collected; `until(pred)` waits for one (or
// for the close when pred.closed is set).
function connect(path, headers = { 'xi-api-key': apiKey }) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${wsBase}${path}`, { headers });
    const msgs = [];
    let waiters = [];
    const wake = () => (waiters = waiters.filter((w) => !w()));
    ws.on('message', (m) => {
      const msg = JSON.parse(m.toString());
      if (msg.audio) msg.bytes = Buffer.from(msg.audio, 'base64').length;
      msgs.push(msg);
      wake();
    });
    ws.on('close', (code) => {
      ws.closeCode = code;
      wake();
    });
    ws.on('unexpected-response', (req, res) => {
      req.destroy(); // the refused handshake's connection is not kept
      reject(new Error(`HTTP ${res.statusCode}`));
    });
    ws.on('error', reject);
    ws.on('open', () =>
      resolve({
        ws,
        msgs,
        send: (msg) => ws.send(JSON.stringify(msg)),
        until: (pred, ms = 30000) =>
          new Promise((res, rej) => {
            const t = setTimeout(() => rej(new Error(`timed out; got ${JSON.stringify(msgs.map((m) => Object.keys(m).join('+') + (m.contextId ? ':' + m.contextId : '')))}, close ${ws.closeCode}`)), ms);
            const w = () => {
              const hit = pred.closed ? ws.closeCode !== undefined : msgs.find(pred);
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
  });
}
const closed = Object.assign(() => false, { closed: true });
const bytesOf = (msgs, id) => msgs.filter((m) => m.audio && m.contextId === id).reduce((n, m) => n + m.bytes, 0);

await check('single_stream_in_pieces', async () => {
  const c = await connect(`/alloy/stream-input${query}`);
  c.send({ text: ' ', voice_settings: { stability: 0.5, similarity_boost: 0.8, speed: 1 }, generation_config: { chunk_length_schedule: [120, 160] }, ...fixed });
  c.send({ text: 'Hello there. How are ' });
  // the whole first sentence is spoken before the input ends
  await c.until((m) => m.audio);
  c.send({ text: 'you today? ' });
  c.send({ text: ' ' }); // Pipecat's keep-alive: nothing to say
  c.send({ text: '' });
  await c.until((m) => m.isFinal === true);
  await c.until(closed);
  const bytes = bytesOf(c.msgs, undefined);
  must(bytes === 2 * BYTES, `${bytes} bytes of audio, want ${2 * BYTES}`);
  must(c.msgs.at(-1).isFinal === true && c.ws.closeCode === 1000, `last ${JSON.stringify(c.msgs.at(-1))}, close ${c.ws.closeCode}`);
  must(c.msgs.every((m) => m.contextId === undefined), 'contextId on a single stream');
  // each sentence's estimated character times after its audio, covering it
  const al = c.msgs.filter((m) => m.alignment).map((m) => m.alignment);
  const spoken = al.map((a) => a.chars.join('')).join('');
  must(al.length === 2 && spoken.replace(/\s+/g, ' ').trim() === 'Hello there. How are you today?', `alignment text "${spoken}"`);
  for (const a of al) {
    const n = a.chars.length, end = a.charStartTimesMs[n - 1] + a.charDurationsMs[n - 1];
    must(a.charStartTimesMs.every((t, i) => i === 0 || t === a.charStartTimesMs[i - 1] + a.charDurationsMs[i - 1]), 'gaps in an alignment');
    must(Math.abs(end - (FRAMES * 1024 * 1000) / 22050) <= 2, `an alignment ends at ${end} ms`);
  }
  return `${c.msgs.length - 1} messages, ${bytes} bytes, 2 alignments, isFinal, close 1000`;
});

await check('single_stream_flush', async () => {
  const c = await connect(`/alloy/stream-input${query}`);
  c.send({ text: ' ', ...fixed });
  c.send({ text: 'no sentence end here ', flush: true });
  await c.until((m) => m.audio);
  c.send({ text: '' });
  await c.until(closed);
  must(bytesOf(c.msgs, undefined) === BYTES, `${bytesOf(c.msgs, undefined)} bytes`);
  return 'flushed text spoken before the end';
});

await check('key_in_the_first_message', async () => {
  const c = await connect(`/alloy/stream-input${query}`, {});
  c.send({ text: ' ', 'xi-api-key': apiKey, ...fixed });
  c.send({ text: 'Hi. ' });
  c.send({ text: '' });
  await c.until(closed);
  must(bytesOf(c.msgs, undefined) === BYTES && c.ws.closeCode === 1000, `${bytesOf(c.msgs, undefined)} bytes, close ${c.ws.closeCode}`);
  const bad = await connect(`/alloy/stream-input${query}`, {});
  bad.send({ text: ' ', 'xi-api-key': 'wrong' });
  const err = await bad.until((m) => m.error);
  await bad.until(closed);
  must(err.error === 'invalid_api_key' && bad.ws.closeCode === 1008, `${JSON.stringify(err)}, close ${bad.ws.closeCode}`);
  return 'accepted; a wrong key gets invalid_api_key and close 1008';
});

await check('multi_contexts_close_context_close_socket', async () => {
  const c = await connect(`/alloy/multi-stream-input${query}`);
  c.send({ text: ' ', context_id: 'a', ...fixed });
  c.send({ text: ' ', context_id: 'b', ...fixed, max_frames: 2 * FRAMES });
  c.send({ text: 'First of a. ', context_id: 'a' });
  c.send({ text: 'A whole one for b. And an unfinished ', context_id: 'b' });
  await c.until((m) => m.audio && m.contextId === 'b');
  // closed: the unflushed text is dropped, the whole sentence finishes
  c.send({ context_id: 'b', close_context: true });
  await c.until((m) => m.isFinal && m.contextId === 'b');
  c.send({ text: '', context_id: 'nobody' }); // a keep-alive opens nothing
  c.send({ text: '', context_id: 'a' }); // kept alive: no isFinal
  c.send({ text: 'Second of a. ', context_id: 'a' });
  c.send({ context_id: 'a', flush: true });
  c.send({ close_socket: true });
  await c.until((m) => m.isFinal && m.contextId === 'a');
  await c.until(closed);
  const a = bytesOf(c.msgs, 'a'), b = bytesOf(c.msgs, 'b');
  must(a === 2 * BYTES, `context a: ${a} bytes, want ${2 * BYTES}`);
  must(b === 2 * BYTES, `context b: ${b} bytes, want ${2 * BYTES} (its whole sentence only)`);
  must(c.msgs.filter((m) => m.isFinal).length === 2 && c.ws.closeCode === 1000, `close ${c.ws.closeCode}`);
  must(c.msgs.filter((m) => m.audio).every((m) => m.contextId === 'a' || m.contextId === 'b'), 'audio without its contextId');
  return `a ${a} bytes, b ${b} (its unflushed text dropped); two isFinal, close 1000`;
});

await check('refusals', async () => {
  const out = [];
  for (const path of [`/nobody/stream-input${query}`, `/alloy/stream-input?output_format=mp3_96000_1`]) {
    try {
      await connect(path);
      throw new Error(`${path} accepted`);
    } catch (e) {
      must(String(e.message).includes('HTTP 400'), `${path}: ${e.message}`);
      out.push('400');
    }
  }
  const c = await connect(`/alloy/multi-stream-input${query}`);
  c.send({ context_id: 'nope', close_context: true });
  const e1 = await c.until((m) => m.error === 'context_not_found');
  c.send({ text: 42, context_id: 'x' });
  const e2 = await c.until((m) => m.error === 'invalid_text');
  must(e1.contextId === 'nope' && e2.contextId === 'x' && c.ws.closeCode === undefined, 'the multi socket stays open');
  // the SDK's multi messages spell the key xi_api_key; a keep-alive with a flush speaks the buffer
  const k = await connect(`/alloy/multi-stream-input${query}`, {});
  k.send({ text: ' ', context_id: 'k', xi_api_key: apiKey, ...fixed });
  k.send({ text: 'no end mark ', context_id: 'k' });
  k.send({ text: '', context_id: 'k', flush: true });
  await k.until((m) => m.audio && m.contextId === 'k');
  k.send({ close_socket: true });
  await k.until(closed);
  must(bytesOf(k.msgs, 'k') === BYTES && k.ws.closeCode === 1000, `${bytesOf(k.msgs, 'k')} bytes, close ${k.ws.closeCode}`);
  c.send({ close_socket: true });
  await c.until(closed);
  out.push('context_not_found', 'invalid_text');
  return out.join(', ');
});
