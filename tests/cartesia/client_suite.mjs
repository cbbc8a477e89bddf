// client_suite.mjs — Cartesia's official Node client (npm
// `@cartesia/cartesia-js`, pinned in package.json) against a running `gepard
// serve`, as an application written for Cartesia's API would use it: the
// voices list (auto-paginated) and one voice, /tts/bytes in every container
// and encoding, /tts/sse events, generation_config, and the errors as the
// client's exception classes. Run by tests/test_server_cartesia.c, which
// starts the server on the tiny fixture model and then decodes the files
// this script saved.
//
//   node client_suite.mjs BASE_URL API_KEY OUT_DIR
//
// Prints one JSON line per check: {"check": NAME, "ok": BOOL, "info": TEXT}.
// Saves the WAV and MP3 bodies as OUT_DIR/NAME.{wav,mp3} and a manifest.json
// with, per file, the sample rate and seconds the C test should decode.
import Cartesia from '@cartesia/cartesia-js';
import { check, must } from './checks.mjs';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [base, apiKey, outDir] = process.argv.slice(2);
const client = new Cartesia({ baseURL: base, apiKey, maxRetries: 0, timeout: 120000 });
const manifest = [];

// Gepard's deterministic, fixed-length sampling (the tiny random model's
// stop head fires at once otherwise): extra body fields the server reads.
const FRAMES = 40;
const SAMPLES = FRAMES * 1024; // at the codec's 22050 Hz
const fixed = { top_k: 1, seed: 5, stop_threshold: 2, max_frames: FRAMES };
const request = (output_format, extra = {}) => ({
  model_id: 'sonic-3',
  transcript: 'Hello from the Cartesia client.',
  voice: { mode: 'id', id: 'alloy' },
  output_format,
  ...fixed,
  ...extra,
});

// The samples `seconds` of audio at `rate` should have, within one codec
// frame of the resampler's rounding.
function near(samples, rate, speed = 1) {
  const want = (SAMPLES / 22050 / speed) * rate;
  return { ok: Math.abs(samples - want) <= (1024 / 22050) * rate + 1, want: Math.round(want) };
}

async function bodyBytes(response) {
  return Buffer.from(await response.arrayBuffer());
}

await check('voices_list_pages', async () => {
  const names = [];
  for await (const voice of client.voices.list({ limit: 5 })) names.push(voice.id);
  must(names.length === 14, `${names.length} voices: ${names}`);
  must(new Set(names).size === names.length, `repeated voices: ${names}`);
  must(names[0] === 'alloy' && names.includes('default'), names.join(','));
  const page = await client.voices.list({ limit: 3, starting_after: 'ash' });
  must(page.data.map((v) => v.id).join() === 'ballad,coral,echo', page.data.map((v) => v.id));
  return `${names.length} voices in pages of 5`;
});

await check('voices_get', async () => {
  const v = await client.voices.get('nova');
  must(v.id === 'nova' && v.name === 'nova' && typeof v.description === 'string', JSON.stringify(v));
  try {
    await client.voices.get('no-such-voice');
  } catch (e) {
    must(e instanceof Cartesia.NotFoundError, `${e.constructor.name}: ${e.message}`);
    return `nova: ${v.description}; unknown voice: 404`;
  }
  throw new Error('an unknown voice was found');
});

const raw = [
  ['pcm_s16le', 24000, 2],
  ['pcm_f32le', 16000, 4],
  ['pcm_mulaw', 8000, 1],
  ['pcm_alaw', 8000, 1],
];
for (const [encoding, rate, width] of raw) {
  await check(`bytes_raw_${encoding}`, async () => {
    const response = await client.tts.generate(
      request({ container: 'raw', encoding, sample_rate: rate }),
    );
    const b = await bodyBytes(response);
    must(b.length % width === 0, `${b.length} bytes`);
    const n = near(b.length / width, rate);
    must(n.ok, `${b.length / width} samples at ${rate} Hz, want ~${n.want}`);
    must(response.headers.get('x-sample-rate') === String(rate), response.headers.get('x-sample-rate'));
    if (encoding === 'pcm_f32le') {
      // float samples go out unclipped (the 16 kHz resampler may overshoot 1)
      let peak = 0;
      for (let i = 0; i < b.length; i += 4) peak = Math.max(peak, Math.abs(b.readFloatLE(i)));
      must(peak > 0.001 && Number.isFinite(peak) && peak < 4, `peak ${peak}`);
    }
    return `${b.length} bytes, ${b.length / width} samples at ${rate} Hz`;
  });
}

const files = [
  ['wav_s16', { container: 'wav', encoding: 'pcm_s16le', sample_rate: 22050 }, 'wav', 1],
  ['wav_f32', { container: 'wav', encoding: 'pcm_f32le', sample_rate: 44100 }, 'wav', 1],
  ['wav_mulaw', { container: 'wav', encoding: 'pcm_mulaw', sample_rate: 8000 }, 'wav', 1],
  ['wav_alaw', { container: 'wav', encoding: 'pcm_alaw', sample_rate: 16000 }, 'wav', 1],
  ['mp3_128k', { container: 'mp3', bit_rate: 128000, sample_rate: 44100 }, 'mp3', 1],
  ['mp3_32k', { container: 'mp3', bit_rate: 32000, sample_rate: 24000 }, 'mp3', 1],
  ['wav_fast', { container: 'wav', encoding: 'pcm_s16le', sample_rate: 24000 }, 'wav', 1.5],
];
for (const [name, format, ext, speed] of files) {
  await check(`bytes_${name}`, async () => {
    const extra = speed !== 1 ? { generation_config: { speed, volume: 0.5 } } : {};
    const response = await client.tts.generate(request(format, extra));
    const b = await bodyBytes(response);
    const type = response.headers.get('content-type');
    must(type === (ext === 'mp3' ? 'audio/mpeg' : 'audio/wav'), type);
    const file = `${name}.${ext}`;
    writeFileSync(join(outDir, file), b);
    manifest.push({ file, rate: format.sample_rate, seconds: SAMPLES / 22050 / speed, lossy: ext === 'mp3', bytes: b.length, bit_rate: format.bit_rate ?? 0 });
    return `${b.length} bytes of ${type}`;
  });
}

await check('sse_chunks_and_done', async () => {
  const stream = await client.tts.generateSSE(
    request({ container: 'raw', encoding: 'pcm_s16le', sample_rate: 24000 }, { context_id: 'ctx-42' }),
  );
  let bytes = 0, chunks = 0, done = null;
  for await (const event of stream) {
    if (event.type === 'chunk') {
      must(event.done === false && event.status_code === 206, JSON.stringify(event).slice(0, 200));
      must(event.context_id === 'ctx-42' && typeof event.step_time === 'number', event.context_id);
      bytes += Buffer.from(event.data, 'base64').length;
      chunks++;
    } else if (event.type === 'done') {
      done = event;
    } else {
      throw new Error(`unexpected event ${JSON.stringify(event).slice(0, 300)}`);
    }
  }
  must(done && done.done === true && done.context_id === 'ctx-42', JSON.stringify(done));
  const n = near(bytes / 2, 24000);
  must(n.ok && chunks > 1, `${chunks} chunks, ${bytes / 2} samples, want ~${n.want}`);
  return `${chunks} chunk events, ${bytes} bytes, then done`;
});

await check('sse_word_timestamps', async () => {
  const stream = await client.tts.generateSSE(
    request({ container: 'raw', encoding: 'pcm_s16le', sample_rate: 22050 }, { add_timestamps: true }),
  );
  let samples = 0, ts = null, done = false;
  for await (const event of stream) {
    if (event.type === 'chunk') samples += Buffer.from(event.data, 'base64').length / 2;
    else if (event.type === 'timestamps') ts = event;
    else if (event.type === 'done') done = !!ts; // the times come before done
  }
  must(ts && done && ts.estimated === true, JSON.stringify(ts));
  const w = ts.word_timestamps;
  must(w.words.join(' ') === 'Hello from the Cartesia client.', w.words.join(' '));
  must(w.start.length === w.words.length && w.end[w.end.length - 1] <= samples / 22050 + 1e-3,
       `${JSON.stringify(w)} over ${samples / 22050} s`);
  return `${w.words.length} words, estimated, over ${(samples / 22050).toFixed(3)} s`;
});

// What Gepard cannot do is a 400 the client raises as BadRequestError.
const refused = [
  ['error_embedding_voice', { voice: { mode: 'embedding', embedding: [0.1, 0.2] } }, 'embedding'],
  ['error_timestamps', { add_timestamps: true }, 'timestamps'],
  ['error_unknown_voice', { voice: { mode: 'id', id: 'a0e99841-438c-4a64-b679-ae501e7d6091' } }, 'does not exist'],
  ['error_sample_rate', { output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: 12345 } }, 'sample_rate'],
  ['error_sse_wav', { output_format: { container: 'wav', encoding: 'pcm_s16le', sample_rate: 24000 } }, 'raw'],
];
for (const [name, change, words] of refused) {
  await check(name, async () => {
    const body = { ...request({ container: 'raw', encoding: 'pcm_s16le', sample_rate: 24000 }), ...change };
    try {
      if (name === 'error_sse_wav') {
        for await (const _ of await client.tts.generateSSE(body)) void _;
      } else {
        await client.tts.generate(body);
      }
    } catch (e) {
      must(e instanceof Cartesia.BadRequestError, `${e.constructor.name}: ${e.message}`);
      must(e.message.includes(words), e.message);
      return e.message;
    }
    throw new Error('accepted');
  });
}

await check('error_wrong_key', async () => {
  const other = new Cartesia({ baseURL: base, apiKey: 'wrong', maxRetries: 0 });
  try {
    await other.voices.list();
  } catch (e) {
    must(e instanceof Cartesia.AuthenticationError, `${e.constructor.name}: ${e.message}`);
    return e.message;
  }
  throw new Error('a wrong key was let in');
});

writeFileSync(join(outDir, 'manifest.json'), JSON.stringify(manifest, null, 1));
