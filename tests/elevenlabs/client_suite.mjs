// client_suite.mjs — ElevenLabs' official Node client (npm
// `@elevenlabs/elevenlabs-js`, pinned in package.json) against a running
// `gepard serve`, as an application written for ElevenLabs' API would use
// it: the voices (list, one, search), text to speech in ElevenLabs' output
// formats, streamed and whole, voice_settings.speed, and the errors as the
// client's exception class. Run by tests/test_server_elevenlabs.c, which
// starts the server on the tiny fixture model and then decodes the files
// this script saved.
//
//   node client_suite.mjs BASE_URL API_KEY OUT_DIR
//
// Prints one JSON line per check: {"check": NAME, "ok": BOOL, "info": TEXT}.
// Saves the WAV, MP3 and Ogg Opus bodies as OUT_DIR/NAME.EXT and a
// manifest.json with, per file, the sample rate and seconds the C test
// should decode.
import { ElevenLabsClient, ElevenLabsError } from '@elevenlabs/elevenlabs-js';
import { check, must } from '../cartesia/checks.mjs';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [base, apiKey, outDir] = process.argv.slice(2);
const client = new ElevenLabsClient({ baseUrl: base, apiKey, maxRetries: 0, timeoutInSeconds: 120 });
const manifest = [];

// Gepard's deterministic, fixed-length sampling (the tiny random model's
// stop head fires at once otherwise): extra body fields the server reads;
// the client strips unknown fields, so they go as additionalBodyParameters.
const FRAMES = 30;
const SAMPLES = FRAMES * 1024; // at the codec's 22050 Hz
const fixed = {
  additionalBodyParameters: { top_k: 1, stop_threshold: 2, max_frames: FRAMES },
};
const request = (outputFormat, extra = {}) => ({
  text: 'Hello from the ElevenLabs client.',
  modelId: 'eleven_multilingual_v2',
  outputFormat,
  seed: 5,
  ...extra,
});

async function bytesOf(stream) {
  const parts = [];
  let chunks = 0;
  for await (const part of stream) {
    parts.push(Buffer.from(part));
    chunks++;
  }
  return { bytes: Buffer.concat(parts), chunks };
}

// Within one codec frame of the resampler's rounding.
function near(samples, rate, speed = 1) {
  const want = (SAMPLES / 22050 / speed) * rate;
  return { ok: Math.abs(samples - want) <= (1024 / 22050) * rate + 1, want: Math.round(want) };
}

await check('voices_get_all', async () => {
  const { voices } = await client.voices.getAll();
  const ids = voices.map((v) => v.voiceId);
  must(ids.length === 14 && ids.includes('default') && ids[0] === 'alloy', ids.join());
  must(voices.every((v) => v.name === v.voiceId && v.category === 'premade'), JSON.stringify(voices[0]));
  return `${ids.length} voices`;
});

await check('voices_get_and_search', async () => {
  const v = await client.voices.get('default');
  must(v.voiceId === 'default' && v.labels.language === 'en', JSON.stringify(v));
  const found = await client.voices.search({ search: 'SHIM' });
  must(found.voices.length === 1 && found.voices[0].voiceId === 'shimmer', JSON.stringify(found));
  must(found.totalCount === 1 && found.hasMore === false, JSON.stringify(found));
  return 'get default; search SHIM finds shimmer';
});

// Files the C test decodes with libsndfile: rate and length.
const files = [
  ['mp3_44100_128', 'mp3', 44100, 128000],
  ['mp3_22050_32', 'mp3', 22050, 32000],
  ['wav_24000', 'wav', 24000, 0],
  ['wav_8000', 'wav', 8000, 0],
  ['opus_48000_64', 'opus', 48000, 64000],
];
for (const [format, ext, rate, bitRate] of files) {
  await check(`convert_${format}`, async () => {
    const { bytes } = await bytesOf(await client.textToSpeech.convert('alloy', request(format), fixed));
    const file = `${format}.${ext}`;
    writeFileSync(join(outDir, file), bytes);
    manifest.push({ file, rate, seconds: SAMPLES / 22050, lossy: bitRate > 0, bit_rate: bitRate, bytes: bytes.length });
    return `${bytes.length} bytes`;
  });
}

// Raw formats: their length says it all.
for (const [format, rate, width] of [['pcm_16000', 16000, 2], ['pcm_44100', 44100, 2], ['ulaw_8000', 8000, 1], ['alaw_8000', 8000, 1]]) {
  await check(`convert_${format}`, async () => {
    const { bytes } = await bytesOf(await client.textToSpeech.convert('alloy', request(format), fixed));
    const n = near(bytes.length / width, rate);
    must(n.ok, `${bytes.length / width} samples, want ~${n.want}`);
    return `${bytes.length / width} samples at ${rate} Hz`;
  });
}

await check('stream_equals_convert_and_the_openai_route', async () => {
  const streamed = await bytesOf(await client.textToSpeech.stream('alloy', request('pcm_22050'), fixed));
  const whole = await bytesOf(await client.textToSpeech.convert('alloy', request('pcm_22050'), fixed));
  must(streamed.bytes.length === SAMPLES * 2, `${streamed.bytes.length} bytes streamed`);
  must(streamed.bytes.equals(whole.bytes), 'stream and convert differ');
  const openai = await fetch(`${base}/v1/audio/speech`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({
      input: 'Hello from the ElevenLabs client.', voice: 'alloy', response_format: 'pcm',
      sample_rate: 22050, seed: 5, ...fixed.additionalBodyParameters,
    }),
  });
  const theirs = Buffer.from(await openai.arrayBuffer());
  must(openai.status === 200 && theirs.equals(streamed.bytes), `OpenAI route: ${openai.status}, ${theirs.length} bytes`);
  return `${streamed.chunks} chunks streamed, byte for byte the OpenAI route's`;
});

await check('with_timestamps', async () => {
  const text = 'Hello from the ElevenLabs client.';
  const { bytes } = await bytesOf(await client.textToSpeech.convert('alloy', request('pcm_22050'), fixed));
  const one = await client.textToSpeech.convertWithTimestamps('alloy', request('pcm_22050'), fixed);
  const audio = Buffer.from(one.audioBase64, 'base64');
  must(audio.equals(bytes), `${audio.length} bytes in the object, ${bytes.length} from convert`);
  const a = one.alignment;
  must(a.characters.join('') === text, `alignment of "${a.characters.join('')}"`);
  const last = a.characterEndTimesSeconds.at(-1);
  must(last > 0 && last <= SAMPLES / 22050 + 1e-3, `the last character ends at ${last} s`);
  must(a.characterStartTimesSeconds.every((t, i) => i === 0 || t >= a.characterStartTimesSeconds[i - 1]), 'times go back');
  const parts = [];
  let aligned = null;
  for await (const chunk of await client.textToSpeech.streamWithTimestamps('alloy', request('pcm_22050'), fixed)) {
    parts.push(Buffer.from(chunk.audioBase64, 'base64'));
    if (chunk.alignment) aligned = chunk.alignment;
  }
  must(Buffer.concat(parts).equals(bytes), `streamed ${Buffer.concat(parts).length} bytes`);
  must(aligned && aligned.characters.join('') === text, 'the stream ends with the alignment');
  return `one object and ${parts.length} streamed chunks, ${a.characters.length} characters ending at ${last} s (estimated)`;
});

await check('voice_settings_speed', async () => {
  const settings = { voiceSettings: { stability: 0.4, similarityBoost: 0.8, style: 0, useSpeakerBoost: true, speed: 1.2 } };
  const { bytes } = await bytesOf(await client.textToSpeech.convert('alloy', request('pcm_22050', settings), fixed));
  const n = near(bytes.length / 2, 22050, 1.2);
  must(n.ok, `${bytes.length / 2} samples at speed 1.2, want ~${n.want}`);
  return `${bytes.length / 2} samples`;
});

async function refused(fn, status, code) {
  try {
    await bytesOf(await fn());
  } catch (e) {
    must(e instanceof ElevenLabsError, `not an ElevenLabsError: ${e}`);
    must(e.statusCode === status, `status ${e.statusCode}, want ${status}: ${JSON.stringify(e.body)}`);
    must(e.body?.detail?.status === code, `detail ${JSON.stringify(e.body)}`);
    must(String(e.body.detail.message).length > 20, 'no message');
    return `${status} ${code}`;
  }
  throw new Error(`accepted; want ${status} ${code}`);
}

await check('errors', async () => {
  const out = [];
  out.push(await refused(() => client.textToSpeech.convert('nobody', request('pcm_22050'), fixed), 400, 'voice_not_found'));
  out.push(await refused(() => client.textToSpeech.convert('alloy', request('pcm_22050', { modelId: 'tts-9000' }), fixed), 400, 'model_not_found'));
  out.push(await refused(() => client.textToSpeech.convert('alloy', request('pcm_22050', { text: '' }), fixed), 400, 'empty_input'));
  out.push(await refused(() => client.voices.get('nobody'), 404, 'voice_not_found'));
  const wrong = new ElevenLabsClient({ baseUrl: base, apiKey: 'wrong', maxRetries: 0 });
  out.push(await refused(() => wrong.voices.getAll(), 401, 'invalid_api_key'));
  return out.join('; ');
});

writeFileSync(join(outDir, 'manifest.json'), JSON.stringify(manifest));
