// validate.js — checks deploy/k8s/*.yaml without a cluster (run by
// deploy/check-recipe.sh; `node deploy/k8s/validate/validate.js`).
//
// 1. YAML: every file parses strictly (no duplicate keys).
// 2. Schema: every object is validated against the Kubernetes 1.27 OpenAPI
//    schema (kubernetes-models' compiled JSON schemas: required fields, types,
//    enums, formats); the ServiceMonitor against the Prometheus Operator's
//    CRD schema (@kubernetes-models/prometheus-operator).
// 3. Field names: the same objects are type-checked by TypeScript against
//    those packages' interfaces, whose excess-property check rejects any field
//    the API does not have (a typo such as `readinesProbe`), which the JSON
//    schemas let through.
// 4. gepard: the probes, ports, labels, metric names and options agree with
//    each other, with deploy/Dockerfile and with the server's source (the
//    metric the autoscaler reads is one /metrics exports; every option in
//    the pod's args is one `gepard serve` has).
//
// Prints one line per problem and "k8s manifests: N objects in M files ok"
// at the end; exits 1 on any problem.
"use strict";
const fs = require("fs");
const path = require("path");
const YAML = require("yaml");
const ts = require("typescript");

// GEPARD_K8S_DIR: check a copy (deploy/check-recipe.sh checks a broken one too)
const k8sDir = path.resolve(process.env.GEPARD_K8S_DIR || path.resolve(__dirname, ".."));
const repo = path.resolve(__dirname, "../../..");
const problems = [];
const fail = (where, msg) => problems.push(`${where}: ${msg}`);

// apiVersion/kind -> the module with its model class and I<Kind> interface
function modelModule(apiVersion, kind) {
  const core = { v1: "v1", "apps/v1": "apps/v1", "autoscaling/v2": "autoscaling/v2" };
  if (core[apiVersion]) return `kubernetes-models/${core[apiVersion]}/${kind}`;
  if (apiVersion === "monitoring.coreos.com/v1")
    return `@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/${kind}`;
  return null;
}

// ---- 1. parse ----
const files = fs.readdirSync(k8sDir).filter((f) => f.endsWith(".yaml")).sort();
const objects = []; // {file, index, doc}
for (const file of files) {
  const text = fs.readFileSync(path.join(k8sDir, file), "utf8");
  const docs = YAML.parseAllDocuments(text, { strict: true, uniqueKeys: true });
  docs.forEach((d, index) => {
    for (const e of d.errors) fail(`${file}#${index}`, `YAML: ${e.message}`);
    for (const w of d.warnings) fail(`${file}#${index}`, `YAML: ${w.message}`);
    const doc = d.toJS();
    if (doc === null || doc === undefined) return;
    objects.push({ file, index, doc });
  });
}

// ---- 2. schema ----
async function validateSchemas() {
for (const o of objects) {
  const where = `${o.file}#${o.index}`;
  const { apiVersion, kind } = o.doc;
  if (apiVersion === "kustomize.config.k8s.io/v1beta1" && kind === "Kustomization") continue;
  const mod = modelModule(apiVersion, kind);
  if (!mod) {
    fail(where, `no schema here for ${apiVersion} ${kind}: add it to validate.js`);
    continue;
  }
  o.module = mod;
  try {
    const Model = (await import(mod))[kind]; // the Prometheus Operator's models are ESM only
    new Model(o.doc).validate();
  } catch (e) {
    fail(where, `schema (${apiVersion} ${kind}): ${e.message}`);
  }
}
}

// ---- 3. field names, through TypeScript's excess-property check ----
function typeCheck() {
  const typed = objects.filter((o) => o.module);
  const lines = [];
  const spans = []; // [first line, last line, object]
  typed.forEach((o, i) => {
    lines.push(`import type { I${o.doc.kind} as T${i} } from "${o.module}";`);
  });
  typed.forEach((o, i) => {
    const body = JSON.stringify(o.doc, null, 2).split("\n");
    const first = lines.length;
    lines.push(`export const object${i}: T${i} = ${body[0]}`, ...body.slice(1));
    spans.push([first, lines.length - 1, o]);
  });
  const virtual = path.join(__dirname, "__manifests__.ts");
  const source = lines.join("\n") + "\n";
  const options = {
    strict: true, noEmit: true, skipLibCheck: true, types: [],
    module: ts.ModuleKind.CommonJS, moduleResolution: ts.ModuleResolutionKind.Node10,
    target: ts.ScriptTarget.ES2020,
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, lang) =>
    path.resolve(name) === virtual ? ts.createSourceFile(name, source, lang) : getSourceFile(name, lang);
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => path.resolve(name) === virtual || fileExists(name);
  const program = ts.createProgram([virtual], options, host);
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const msg = ts.flattenDiagnosticMessageText(d.messageText, " ");
    let where = "TypeScript";
    if (d.file && d.start !== undefined) {
      const line = d.file.getLineAndCharacterOfPosition(d.start).line;
      const span = spans.find(([a, b]) => line >= a && line <= b);
      where = span ? `${span[2].file}#${span[2].index} (line ${line - span[0] + 1} of the object as JSON)` : `line ${line + 1}`;
    }
    fail(where, `fields: ${msg}`);
  }
}

// ---- 4. gepard's own consistency ----
const find = (kind) => objects.filter((o) => o.doc.kind === kind);
const one = (kind) => {
  const list = find(kind);
  if (list.length !== 1) fail("manifests", `want exactly one ${kind}, found ${list.length}`);
  return list[0] ? list[0].doc : null;
};
const read = (rel) => fs.readFileSync(path.join(repo, rel), "utf8");
const dockerfile = read("deploy/Dockerfile");
const metricsSource = read("src/server/metrics.c");
const cliSource = fs.readdirSync(path.join(repo, "src/cli"))
  .filter((f) => /\.(c|h)$/.test(f)).map((f) => read(`src/cli/${f}`)).join("\n");
const exported = (name) => metricsSource.includes(`"${name}"`);

function checkGepard() {
  const dep = one("Deployment"), svc = one("Service"), hpa = one("HorizontalPodAutoscaler");
  if (!dep || !svc || !hpa) return;
  const where = "deployment.yaml";
  const pod = dep.spec.template;
  const c = pod.spec.containers.find((x) => x.name === "gepard") || pod.spec.containers[0];
  const labels = pod.metadata.labels || {};
  for (const [k, v] of Object.entries(dep.spec.selector.matchLabels || {}))
    if (labels[k] !== v) fail(where, `the selector's ${k}=${v} is not a label of the pod template`);
  for (const [k, v] of Object.entries(svc.spec.selector || {}))
    if (labels[k] !== v) fail("service.yaml", `the selector's ${k}=${v} does not select the gepard pods`);
  // the GPU
  for (const part of ["requests", "limits"]) {
    const gpu = ((c.resources || {})[part] || {})["nvidia.com/gpu"];
    if (String(gpu) !== "1") fail(where, `resources.${part}["nvidia.com/gpu"] must be 1 (one server per GPU), got ${gpu}`);
  }
  // ports: the Dockerfile's EXPOSE and --port, the container, the probes, the Service
  const expose = (dockerfile.match(/^EXPOSE\s+(\d+)/m) || [])[1];
  const entry = (dockerfile.match(/^ENTRYPOINT\s+(\[.*\])/m) || [])[1];
  const entryArgs = entry ? JSON.parse(entry) : [];
  if (entryArgs[0] !== "gepard" || entryArgs[1] !== "serve") fail("Dockerfile", `ENTRYPOINT must start with gepard serve, got ${entry}`);
  const portArg = entryArgs[entryArgs.indexOf("--port") + 1];
  const http = (c.ports || []).find((p) => p.name === "http");
  if (!http) fail(where, "the container has no port named http");
  else {
    if (String(http.containerPort) !== expose || String(http.containerPort) !== portArg)
      fail(where, `containerPort ${http.containerPort} differs from the Dockerfile's EXPOSE ${expose} / --port ${portArg}`);
    const ann = pod.metadata.annotations || {};
    if (ann["prometheus.io/scrape"] !== "true" || ann["prometheus.io/path"] !== "/metrics" ||
        ann["prometheus.io/port"] !== String(http.containerPort))
      fail(where, "the prometheus.io/{scrape,path,port} annotations must be true, /metrics and the http port");
  }
  const probe = (p, want, name) => {
    if (!p || !p.httpGet || p.httpGet.path !== want || (p.httpGet.port !== "http" && String(p.httpGet.port) !== String(http && http.containerPort)))
      fail(where, `${name} must be an httpGet of ${want} on the http port`);
  };
  probe(c.readinessProbe, "/ready", "readinessProbe");
  probe(c.livenessProbe, "/health", "livenessProbe");
  if (!/HEALTHCHECK[\s\S]*\/health/.test(dockerfile)) fail("Dockerfile", "the HEALTHCHECK must probe /health");
  for (const p of svc.spec.ports)
    if (p.targetPort !== "http" && String(p.targetPort) !== String(http && http.containerPort))
      fail("service.yaml", `port ${p.name} targets ${p.targetPort}, not the container's http port`);
  // the user: the image's USER is the pod's runAsUser, and not root
  const user = (dockerfile.match(/^USER\s+(\d+)/m) || [])[1];
  const sc = pod.spec.securityContext || {};
  if (!user || user === "0") fail("Dockerfile", "USER must be a numeric non-root uid");
  if (String(sc.runAsUser) !== user || sc.runAsNonRoot !== true)
    fail(where, `securityContext must have runAsNonRoot and runAsUser ${user} (the image's USER)`);
  // the options of the pod's args exist
  for (const a of c.args || [])
    if (a.startsWith("--") && !cliSource.includes(`{"${a.slice(2)}",`))
      fail(where, `args: gepard serve has no option ${a} (src/cli/)`);
  // draining: the grace period covers preStop and --drain
  const args = c.args || [];
  const drain = args.includes("--drain") ? Number(args[args.indexOf("--drain") + 1]) : 10;
  const pre = (((c.lifecycle || {}).preStop || {}).exec || {}).command || [];
  const sleep = pre[0] === "sleep" ? Number(pre[1]) : 0;
  if (!(pod.spec.terminationGracePeriodSeconds > drain + sleep))
    fail(where, `terminationGracePeriodSeconds must exceed preStop ${sleep} s + --drain ${drain} s`);
  // the autoscaler: the Deployment, and metrics /metrics exports
  const ref = hpa.spec.scaleTargetRef;
  if (ref.kind !== "Deployment" || ref.name !== dep.metadata.name)
    fail("hpa.yaml", `scaleTargetRef must be the Deployment ${dep.metadata.name}`);
  const hpaMetrics = (hpa.spec.metrics || []).map((m) => m.pods && m.pods.metric.name).filter(Boolean);
  if (!hpaMetrics.includes("gepard_queued_streams"))
    fail("hpa.yaml", "the autoscaler must read gepard_queued_streams (queue depth)");
  for (const m of hpaMetrics)
    if (!exported(m)) fail("hpa.yaml", `metric ${m} is not exported by src/server/metrics.c`);
  // prometheus-adapter: serves exactly those names, from exported series
  for (const cm of find("ConfigMap")) {
    const cfg = YAML.parse(cm.doc.data["config.yaml"], { strict: true, uniqueKeys: true });
    const served = [];
    for (const r of cfg.rules || []) {
      const series = (r.seriesQuery.match(/^'?([a-z_:][a-z0-9_:]*)/) || [])[1];
      if (!exported(series)) fail(cm.file, `seriesQuery names ${series}, which /metrics does not export`);
      if (!r.resources || !r.resources.overrides || !r.resources.overrides.pod)
        fail(cm.file, `the rule for ${series} must map the pod label to pods`);
      served.push(r.name && r.name.as ? r.name.as : series);
    }
    for (const m of hpaMetrics)
      if (!served.includes(m)) fail(cm.file, `no rule serves ${m}, which hpa.yaml reads`);
  }
  // ServiceMonitor: the Service's port and /metrics
  for (const sm of find("ServiceMonitor")) {
    const ok = sm.doc.spec.endpoints.some((e) => svc.spec.ports.some((p) => p.name === e.port) && e.path === "/metrics");
    if (!ok) fail(sm.file, "an endpoint must scrape /metrics on a named port of the Service");
  }
  // kustomization: its resources exist and are the core objects
  for (const k of find("Kustomization"))
    for (const r of k.doc.resources || [])
      if (!fs.existsSync(path.join(k8sDir, r))) fail(k.file, `resource ${r} does not exist`);
}

validateSchemas().then(() => {
  typeCheck();
  checkGepard();
  for (const p of problems) console.log(p);
  const n = objects.length;
  console.log(problems.length
    ? `k8s manifests: ${problems.length} problem(s) in ${n} objects`
    : `k8s manifests: ${n} objects in ${files.length} files ok (schema: Kubernetes 1.27 via ` +
      "kubernetes-models, field names via TypeScript, gepard consistency)");
  process.exit(problems.length ? 1 : 0);
});
