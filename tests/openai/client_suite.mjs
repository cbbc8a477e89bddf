// client_suite.mjs — OpenAI's official Node client (npm `openai`, pinned in
// package.json) against a running `gepard serve`, as an application would
// use it. Run by tests/test_server_openai_client.c, which starts the server
// on the tiny fixture model and then decodes what this script saved.
//
//   node client_suite.mjs BASE_URL API_KEY OUT_DIR
//
// Prints one JSON line per check: {"check": NAME, "ok": BOOL, "info": TEXT}.
// Saves every audio body as OUT_DIR/NAME.FORMAT and a manifest.json that
// says, per file, what the C test should find in it (format, sample rate,
// samples, time to the first chunk).
import OpenAI from 'openai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [base, apiKey, outDir] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base + '/v1', apiKey, maxRetries: 0, timeout: 120000 });
const manifest = [];

// Gepard's deterministic, fixed-length sampling (the tiny random model's stop
// head fires at once otherwise): extra body fields the client passes through.
const FRAMES = 40;
const fixed = (frames = FRAMES) => ({ top_k: 1, seed: 5, stop_threshold: 2, max_frames: frames });

function report(check, ok, info) {
  console.log(JSON.stringify({ check, ok: !!ok, info: String(info ?? '') }));
}

async function check(name, fn) {
  try {
    const info = await fn();
    report(name, true, info);
  } catch (e) {
    report(name, false, (e && e.stack) || e);
  }
}

function must(cond, what) {
  if (!cond) throw new Error(what);
}

// Whether the complete Ogg pages in `b` include one with audio (granule > 0).
function oggHasAudio(b) {
  for (let i = 0; i + 27 <= b.length; ) {
    if (b.toString('latin1', i, i + 4) !== 'OggS') return false;
    const segs = b[i + 26];
    if (i + 27 + segs > b.length) return false;
    let body = 0;
    for (let k = 0; k < segs; k++) body += b[i + 27 + k];
    if (i + 27 + segs + body > b.length) return false;
    if (b.readBigInt64LE(i + 6) > 0n) return true;
    i += 27 + segs + body;
  }
  return false;
}

// Read a streamed body chunk by chunk; times are from the request's start.
// first_audio: when an Ogg stream's first audio page had arrived.
async function readStream(response, t0, ogg) {
  const reader = response.body.getReader();
  const chunks = [];
  let first = -1, firstAudio = -1;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (first < 0) first = performance.now() - t0;
    chunks.push(Buffer.from(value));
    if (ogg && firstAudio < 0 && oggHasAudio(Buffer.concat(chunks))) firstAudio = performance.now() - t0;
  }
  return { bytes: Buffer.concat(chunks), first, firstAudio, total: performance.now() - t0, chunks: chunks.length };
}

function save(name, format, bytes, extra) {
  const file = `${name}.${format}`;
  writeFileSync(join(outDir, file), bytes);
  manifest.push({ file, format, bytes: bytes.length, ...extra });
}

const formats = ['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm'];
const mime = { mp3: 'audio/mpeg', opus: 'audio/ogg', aac: 'audio/aac', flac: 'audio/flac', wav: 'audio/wav', pcm: 'audio/pcm' };

// ---- models ----
await check('models.list', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  for (const want of ['tts-1', 'tts-1-hd', 'gpt-4o-mini-tts'])
    must(ids.includes(want), `models.list lacks ${want}: ${ids.join(', ')}`);
  return ids.join(', ');
});
await check('models.retrieve', async () => {
  const m = await client.models.retrieve('gpt-4o-mini-tts');
  must(m.id === 'gpt-4o-mini-tts' && m.object === 'model' && m.created > 0, JSON.stringify(m));
  const dated = await client.models.retrieve('gpt-4o-mini-tts-2025-12-15');
  must(dated.id === 'gpt-4o-mini-tts-2025-12-15', JSON.stringify(dated));
  return JSON.stringify(m);
});
await check('models.retrieve unknown is NotFoundError', async () => {
  try {
    await client.models.retrieve('whisper-1');
  } catch (e) {
    must(e instanceof OpenAI.NotFoundError && e.status === 404, `${e.constructor.name} ${e.status}`);
    must(e.requestID, 'no request id on the error');
    return `${e.constructor.name}: ${e.message}`;
  }
  throw new Error('no error');
});

// ---- every format: whole (arrayBuffer), streamed (body reader), stream:false ----
for (const format of formats) {
  await check(`speech ${format} whole`, async () => {
    const t0 = performance.now();
    const r = await client.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'Hello world!', response_format: format, ...fixed() });
    must(r.headers.get('content-type') === mime[format], `Content-Type ${r.headers.get('content-type')}`);
    must(r.headers.get('x-request-id'), 'no x-request-id');
    const bytes = Buffer.from(await r.arrayBuffer());
    save(`whole-${format}`, format, bytes, { rate: Number(r.headers.get('x-sample-rate')), samples: FRAMES * 1024, speed: 1, total_ms: performance.now() - t0 });
    return `${bytes.length} bytes, X-Sample-Rate ${r.headers.get('x-sample-rate')}`;
  });
  await check(`speech ${format} streamed`, async () => {
    const t0 = performance.now();
    const r = await client.audio.speech.create({ model: 'gpt-4o-mini-tts', voice: 'marin', input: 'Hello world!', response_format: format, ...fixed(150) });
    const s = await readStream(r, t0, format === 'opus');
    save(`stream-${format}`, format, s.bytes, { rate: Number(r.headers.get('x-sample-rate')), samples: 150 * 1024, speed: 1, first_ms: s.first, first_audio_ms: s.firstAudio, total_ms: s.total, chunks: s.chunks });
    must(s.chunks >= 2, `${s.chunks} chunk(s): not streamed`);
    return `${s.bytes.length} bytes in ${s.chunks} chunks, first after ${s.first.toFixed(0)} ms of ${s.total.toFixed(0)}`;
  });
  await check(`speech ${format} stream:false`, async () => {
    const r = await client.audio.speech.create({ model: 'tts-1-hd', voice: 'cedar', input: 'Hello world!', response_format: format, stream: false, ...fixed() });
    must(r.headers.get('content-length'), 'no Content-Length');
    const bytes = Buffer.from(await r.arrayBuffer());
    must(bytes.length === Number(r.headers.get('content-length')), 'length differs');
    save(`nostream-${format}`, format, bytes, { rate: Number(r.headers.get('x-sample-rate')), samples: FRAMES * 1024, speed: 1 });
    return `${bytes.length} bytes`;
  });
}

// ---- SSE ----
await check('speech sse', async () => {
  const r = await client.audio.speech.create({ model: 'gpt-4o-mini-tts', voice: 'alloy', input: 'Hello world!', response_format: 'pcm', stream_format: 'sse', ...fixed() });
  must(r.headers.get('content-type') === 'text/event-stream', `Content-Type ${r.headers.get('content-type')}`);
  const text = await r.text();
  const audio = [];
  let done = null;
  for (const ev of text.split('\n\n')) {
    if (!ev.trim()) continue;
    must(ev.startsWith('data: '), `bad event ${ev.slice(0, 40)}`);
    const j = JSON.parse(ev.slice(6));
    if (j.type === 'speech.audio.delta') audio.push(Buffer.from(j.audio, 'base64'));
    else if (j.type === 'speech.audio.done') done = j;
    else throw new Error(`event type ${j.type}`);
  }
  must(done && done.usage && done.usage.output_tokens === FRAMES, `done event: ${JSON.stringify(done)}`);
  save('sse-pcm', 'pcm', Buffer.concat(audio), { rate: 24000, samples: FRAMES * 1024, speed: 1 });
  return `${audio.length} deltas, usage ${JSON.stringify(done.usage)}`;
});

// ---- speed ----
for (const speed of [0.25, 0.5, 1.5, 2, 4]) {
  await check(`speech speed ${speed}`, async () => {
    const r = await client.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'Hello world!', response_format: 'pcm', speed, ...fixed() });
    const bytes = Buffer.from(await r.arrayBuffer());
    save(`speed-${speed}`, 'pcm', bytes, { rate: 24000, samples: FRAMES * 1024, speed });
    return `${bytes.length / 2} samples`;
  });
}
await check('speech speed 2 aac', async () => {
  const r = await client.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'Hello world!', response_format: 'aac', speed: 2, ...fixed() });
  const bytes = Buffer.from(await r.arrayBuffer());
  save('speed-2-aac', 'aac', bytes, { rate: 22050, samples: FRAMES * 1024, speed: 2 });
  return `${bytes.length} bytes`;
});

// ---- errors map to the client's exception classes ----
const bad = [
  ['unknown voice', { voice: 'nobody' }, OpenAI.BadRequestError, 400, 'voice_not_found', 'voice'],
  ['unknown model', { model: 'whisper-1' }, OpenAI.BadRequestError, 400, 'model_not_found', 'model'],
  ['speed out of range', { speed: 5 }, OpenAI.BadRequestError, 400, 'invalid_value', 'speed'],
  ['unknown format', { response_format: 'vorbis' }, OpenAI.BadRequestError, 400, 'unsupported_format', 'response_format'],
  ['empty input', { input: ' ' }, OpenAI.BadRequestError, 400, 'empty_input', 'input'],
];
for (const [name, fields, cls, status, code, param] of bad) {
  await check(`error: ${name}`, async () => {
    try {
      const r = await client.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'Hi', ...fixed(2), ...fields });
      await r.arrayBuffer();
    } catch (e) {
      must(e instanceof cls, `${e.constructor.name}, want ${cls.name}: ${e.message}`);
      must(e.status === status && e.code === code && e.param === param, `status ${e.status} code ${e.code} param ${e.param}`);
      must(e.requestID, 'no request id');
      return `${e.constructor.name} ${e.status} ${e.code}: ${e.message}`;
    }
    throw new Error('no error');
  });
}
await check('error: wrong API key', async () => {
  const other = new OpenAI({ baseURL: base + '/v1', apiKey: 'wrong-key', maxRetries: 0 });
  try {
    await other.models.list();
  } catch (e) {
    must(e instanceof OpenAI.AuthenticationError && e.status === 401, `${e.constructor.name} ${e.status}`);
    return e.message;
  }
  throw new Error('no error');
});

// ---- abort: the client gives up mid-stream; the server frees the stream ----
await check('abort mid-stream frees the slot', async () => {
  const ac = new AbortController();
  const t0 = performance.now();
  const r = await client.audio.speech.create(
    { model: 'tts-1', voice: 'alloy', input: 'A long one.', response_format: 'pcm', ...fixed(2000) },
    { signal: ac.signal },
  );
  const reader = r.body.getReader();
  let got = 0;
  let aborted = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      got += value.length;
      if (got > 8192) ac.abort();
    }
  } catch (e) {
    aborted = e.name === 'AbortError' || e instanceof OpenAI.APIUserAbortError;
  }
  must(aborted, `the read ended without an abort after ${got} bytes`);
  // the server (one stream, no queue) must take the next request soon
  let last = '';
  for (let i = 0; i < 50; i++) {
    try {
      const again = await client.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'Hi', response_format: 'pcm', ...fixed(4) });
      const bytes = Buffer.from(await again.arrayBuffer());
      must(bytes.length > 0, 'empty');
      return `aborted after ${got} bytes; the next request was served after ${(performance.now() - t0).toFixed(0)} ms (${i} busy answers)`;
    } catch (e) {
      must(e instanceof OpenAI.RateLimitError, `${e.constructor.name}: ${e.message}`);
      last = e.message;
      await new Promise((res) => setTimeout(res, 100));
    }
  }
  throw new Error(`still busy 5 s after the abort: ${last}`);
});
await check('speech create aborted before the response', async () => {
  const ac = new AbortController();
  const p = client.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'Hi', response_format: 'pcm', ...fixed(2000) }, { signal: ac.signal });
  ac.abort();
  try {
    const r = await p;
    await r.arrayBuffer();
  } catch (e) {
    must(e instanceof OpenAI.APIUserAbortError, `${e.constructor.name}: ${e.message}`);
    return e.constructor.name;
  }
  throw new Error('no error');
});

writeFileSync(join(outDir, 'manifest.json'), JSON.stringify(manifest, null, 1));
report('manifest', true, `${manifest.length} files`);
