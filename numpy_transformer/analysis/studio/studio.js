// The attention studio: draws the heads of one model on one sentence from the JSON block
// #attention-data (written by numpy_transformer/analysis/studio/studio_data.py, format in
// docs/chapter3.md). No library, no network: everything it shows is in that block.
"use strict";

const started = performance.now();
const data = JSON.parse(document.getElementById("attention-data").textContent);
const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";

// ---- the data, indexed -------------------------------------------------------------------------

const byKey = new Map(data.attention.map((e) => [`${e.kind}/${e.layer}/${e.head}`, e]));
const kinds = [...new Set(data.attention.map((e) => e.kind))];
const KIND_NAMES = {encoder_self: "encoder self-attention", decoder_self: "decoder self-attention (masked)",
                    decoder_cross: "decoder cross-attention", self: "self-attention"};

function entry(kind, layer, head) { return byKey.get(`${kind}/${layer}/${head}`); }
function layersOf(kind) { return [...new Set(data.attention.filter((e) => e.kind === kind).map((e) => e.layer))]; }
function headsOf(kind, layer) {
  return data.attention.filter((e) => e.kind === kind && e.layer === layer).map((e) => e.head);
}

const state = {kind: kinds[0], layer: 0, head: 0, query: 0, view: "matrix", approximation: false, allHeads: false};

function current() { return entry(state.kind, state.layer, state.head); }
function queryTokens(e) { return data.tokens[e.queries]; }
function keyTokens(e) { return data.tokens[e.keys]; }
// The matrix on show: the head's weights H, or its approximation X = I_nP + Ẽ (eq. 21).
function shown(e) { return state.approximation && e.approximation ? e.approximation.matrix : e.weights; }

// White (0) to dark blue (1), as the project's heat maps: [red, green, blue].
function rgb(w) {
  const t = Math.max(0, Math.min(1, w));
  return [Math.round(255 - 224 * t), Math.round(255 - 177 * t), Math.round(255 - 115 * t)];
}
function colour(w) { return `rgb(${rgb(w).join(",")})`; }
function fixed(x, decimals = 4) { return Number.isFinite(x) ? x.toFixed(decimals) : (x < 0 ? "−∞" : "∞"); }
function element(tag, attributes = {}, text = "") {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text) node.textContent = text;
  return node;
}
function svgElement(tag, attributes = {}, text = "") {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text) node.textContent = text;
  return node;
}

// ---- controls ----------------------------------------------------------------------------------

function fill(select, options, value) {
  select.replaceChildren(...options.map(([v, label]) => element("option", {value: v}, label)));
  select.value = String(value);
}

// Keep layer, head and query inside what the chosen kind has, then show them in the controls.
function syncControls() {
  const layers = layersOf(state.kind);
  if (!layers.includes(state.layer)) state.layer = layers[0];
  const heads = headsOf(state.kind, state.layer);
  if (!heads.includes(state.head)) state.head = heads[0];
  const queries = queryTokens(current());
  state.query = Math.max(0, Math.min(queries.length - 1, state.query));
  fill($("kind"), kinds.map((k) => [k, KIND_NAMES[k] || k]), state.kind);
  fill($("layer"), layers.map((l) => [l, String(l)]), state.layer);
  fill($("head"), heads.map((h) => [h, String(h)]), state.head);
  fill($("query"), queries.map((t, i) => [i, `${i}: ${t}`]), state.query);
  $("approximation").checked = state.approximation;
  $("approximation").disabled = !current().approximation;
  for (const button of document.querySelectorAll("#views button")) {
    button.classList.toggle("active", button.dataset.view === state.view);
  }
  $("views").querySelector('[data-view="replay"]').disabled = !data.steps;
  for (const id of ["export-png", "export-svg"]) {            // the equation view is text: select and copy it
    $(id).disabled = state.view === "equation";
  }
}

function statusLine(e) {
  let line = `${KIND_NAMES[e.kind] || e.kind}, layer ${e.layer}, head ${e.head}: role ${e.role}` +
             ` · ${queryTokens(e).length} queries × ${keyTokens(e).length} keys`;
  if (state.approximation && e.approximation) {
    const a = e.approximation;
    line += ` · showing X = I_nP + Ẽ (family ${a.family}, w = ${a.w}, ${a.num_pos} rare tokens):` +
            ` |H − X| = ${fixed(a.distance, 3)}, captured mass ${(100 * a.captured_mass).toFixed(1)} %`;
  }
  return line;
}

function render() {
  syncControls();
  $("status").textContent = statusLine(current());
  const view = $("view");
  view.replaceChildren();
  const draw = {model: drawModel, matrix: drawMatrix, heads: drawHeads, equation: drawEquation, replay: drawReplay};
  draw[state.view](view);
}

// ---- matrix view: the heat map, tokens on both axes, the value under the cursor ----------------

// Geometry of a matrix drawing: cell size and margins for the token labels.
function layout(nq, nk, room = 600) {
  const cell = Math.max(2, Math.min(28, Math.floor(room / Math.max(nq, nk))));
  return {cell, left: 100, top: 100, width: 100 + cell * nk + 10, height: 100 + cell * nq + 10};
}
// Every step-th label, so that labels never overlap.
function labelStep(cell) { return Math.max(1, Math.ceil(11 / cell)); }

// The matrix as an image of one pixel per entry (ImageData: one call, however many entries).
function matrixImage(matrix) {
  const canvas = element("canvas", {width: matrix[0].length, height: matrix.length});
  const context = canvas.getContext("2d"), image = context.createImageData(canvas.width, canvas.height);
  matrix.forEach((row, i) => row.forEach((w, j) => {
    const at = 4 * (i * canvas.width + j), [red, green, blue] = rgb(w);
    image.data[at] = red;
    image.data[at + 1] = green;
    image.data[at + 2] = blue;
    image.data[at + 3] = 255;
  }));
  context.putImageData(image, 0, 0);
  return canvas;
}

function drawMatrixOn(canvas, e, geometry, labels = true) {
  const matrix = shown(e), {cell, left, top} = geometry;
  const context = canvas.getContext("2d");
  context.fillStyle = "white";
  context.fillRect(0, 0, canvas.width, canvas.height);
  context.imageSmoothingEnabled = false;               // square cells, however large
  context.drawImage(matrixImage(matrix), left, top, cell * matrix[0].length, cell * matrix.length);
  if (!labels) return;
  context.fillStyle = "#222";
  context.font = "11px system-ui, sans-serif";
  const step = labelStep(cell);
  context.textAlign = "right";
  context.textBaseline = "middle";
  queryTokens(e).forEach((t, i) => { if (i % step === 0) context.fillText(t, left - 4, top + (i + 0.5) * cell); });
  keyTokens(e).forEach((t, j) => {
    if (j % step) return;
    context.save();
    context.translate(left + (j + 0.5) * cell, top - 4);
    context.rotate(-Math.PI / 2);
    context.textAlign = "left";
    context.fillText(t, 0, 0);
    context.restore();
  });
}

// The readout line for query i, key j of entry e.
function cellText(e, i, j) {
  const H = e.weights[i][j];
  let text = `query ${i} “${queryTokens(e)[i]}” → key ${j} “${keyTokens(e)[j]}”: ${fixed(H)}`;
  if (state.approximation && e.approximation) text += ` (X: ${fixed(e.approximation.matrix[i][j])})`;
  return text;
}

function drawMatrix(view) {
  const e = current(), geometry = layout(queryTokens(e).length, keyTokens(e).length);
  const canvas = element("canvas", {id: "matrix", width: geometry.width, height: geometry.height,
                                    "data-left": geometry.left, "data-top": geometry.top, "data-cell": geometry.cell});
  drawMatrixOn(canvas, e, geometry);
  const cellAt = (event) => {
    const box = canvas.getBoundingClientRect();
    const i = Math.floor((event.clientY - box.top - geometry.top) / geometry.cell);
    const j = Math.floor((event.clientX - box.left - geometry.left) / geometry.cell);
    return i >= 0 && j >= 0 && i < e.weights.length && j < e.weights[0].length ? [i, j] : null;
  };
  canvas.addEventListener("mousemove", (event) => {
    const at = cellAt(event);
    if (at) $("readout").textContent = cellText(e, ...at);
  });
  canvas.addEventListener("click", (event) => {    // a click chooses the query for the other views
    const at = cellAt(event);
    if (at) { state.query = at[0]; syncControls(); $("readout").textContent = cellText(e, ...at); }
  });
  view.append(canvas);
}

// ---- head view: lines from each query to the keys it attends to, weight as opacity (bertviz) ---

// One colour per head (evenly spaced hues), for the head view's "every head" mode.
function headColour(head, heads) { return `hsl(${Math.round(360 * head / heads)}, 70%, 40%)`; }

function drawHeads(view) {
  const e = current(), queries = queryTokens(e), keys = keyTokens(e);
  const heads = headsOf(state.kind, state.layer);
  // The heads drawn: the chosen one in blue, or (as bertviz) every head of the layer in its colour.
  const drawn = state.allHeads ? heads.map((h) => [entry(state.kind, state.layer, h), headColour(h, heads.length)])
                               : [[e, "#1f4e8c"]];
  const toggle = element("label", {}, " every head of the layer, one colour each (h)");
  const box = element("input", {type: "checkbox", id: "all-heads"});
  box.checked = state.allHeads;
  box.addEventListener("change", () => { state.allHeads = box.checked; render(); });
  toggle.prepend(box);
  view.append(element("p"));
  view.lastChild.append(toggle);
  const row = 18, width = 420, height = row * Math.max(queries.length, keys.length) + 20;
  const svg = svgElement("svg", {id: "heads", width, height, viewBox: `0 0 ${width} ${height}`, xmlns: SVG});
  const lines = svgElement("g");
  svg.append(lines);
  const drawLines = (only) => {
    lines.replaceChildren();
    for (const [head, stroke] of drawn) {
      shown(head).forEach((weights, i) => {
        if (only !== null && i !== only) return;
        weights.forEach((w, j) => {
          if (w < 0.01) return;                // invisible anyway; keeps long inputs fast
          lines.append(svgElement("line", {x1: 150, y1: 15 + i * row, x2: 270, y2: 15 + j * row, stroke,
                                           "stroke-width": 2, "stroke-opacity": w.toFixed(3)}));
        });
      });
    }
  };
  queries.forEach((t, i) => {
    const label = svgElement("text", {x: 145, y: 19 + i * row, "text-anchor": "end",
                                      class: "token" + (i === state.query ? " chosen" : "")}, t);
    label.addEventListener("mouseenter", () => { drawLines(i); $("readout").textContent = rowText(e, i); });
    label.addEventListener("mouseleave", () => drawLines(null));
    label.addEventListener("click", () => { state.query = i; render(); });
    svg.append(label);
  });
  keys.forEach((t, j) => svg.append(svgElement("text", {x: 275, y: 19 + j * row, class: "token"}, t)));
  drawLines(null);
  view.append(svg);
}

// The largest weights of query i, as a line.
function rowText(e, i) {
  const keys = keyTokens(e), top = e.weights[i].map((w, j) => [w, j]).sort((a, b) => b[0] - a[0]).slice(0, 3);
  return `query ${i} “${queryTokens(e)[i]}” attends most to ` +
         top.map(([w, j]) => `“${keys[j]}” ${fixed(w)}`).join(", ");
}

// ---- model view: every layer × head of the kind as a thumbnail; a click opens it ---------------

function drawModel(view) {
  const layers = layersOf(state.kind), heads = headsOf(state.kind, layers[0]);
  const grid = element("div", {class: "grid", id: "model"});
  grid.style.gridTemplateColumns = `repeat(${heads.length}, auto)`;
  for (const layer of layers) {
    for (const head of heads) {
      const e = entry(state.kind, layer, head);
      const canvas = matrixImage(shown(e)), size = 72;      // one pixel per entry, shown 72 px wide
      const n = Math.max(canvas.width, canvas.height);
      canvas.style.width = `${Math.round(size * canvas.width / n)}px`;
      canvas.style.height = `${Math.round(size * canvas.height / n)}px`;
      const current = layer === state.layer && head === state.head;
      const thumb = element("div", {class: "thumb" + (current ? " current" : ""), "data-layer": layer,
                                    "data-head": head,
                                    title: `layer ${layer}, head ${head}: ${e.role}`});
      thumb.style.minWidth = `${size}px`;
      thumb.append(canvas, element("div", {}, `L${layer} H${head} ${e.role}`));
      thumb.addEventListener("click", () => { Object.assign(state, {layer, head, view: "matrix"}); render(); });
      grid.append(thumb);
    }
  }
  view.append(grid);
}

// ---- equation view: eqs. (5)–(7), (10) for the chosen head and query, with the model's numbers --

// Eq. (5)–(6), (10) for query i: scores q_i·k_j/√d_k, the mask M_ij, the softmax and z_i = Σ a_ij v_j.
function attendOne(e, i) {
  const q = e.q[i], scale = Math.sqrt(e.d_k), allowed = data.masks[e.kind][i];
  const dots = e.k.map((k) => k.reduce((sum, x, c) => sum + x * q[c], 0));
  const scores = dots.map((d, j) => (allowed[j] ? d / scale : -Infinity));
  const top = Math.max(...scores);
  const exps = scores.map((s) => (Number.isFinite(s) ? Math.exp(s - top) : 0));
  const total = exps.reduce((a, b) => a + b, 0);
  const softmax = exps.map((x) => (total > 0 ? x / total : 0));
  const z = e.v[0].map((_, c) => e.v.reduce((sum, v, j) => sum + softmax[j] * v[c], 0));
  return {q, dots, scores, allowed, softmax, z};
}

// A vector, folded past 8 entries: the first four, …, the last two; the whole on a click.
function vector(values, decimals = 4) {
  const text = (xs) => "[" + xs.map((x) => fixed(x, decimals)).join(", ") + "]";
  if (values.length <= 8) return element("span", {class: "vector"}, text(values));
  const details = element("details", {class: "vector"});
  details.append(element("summary", {}, "[" + [...values.slice(0, 4), null, ...values.slice(-2)]
    .map((x) => (x === null ? "…" : fixed(x, decimals))).join(", ") + `]  (${values.length} entries)`),
  element("span", {}, text(values)));
  return details;
}

function drawEquation(view) {
  const e = current();
  if (!e.q) {
    view.append(element("p", {}, "The equation view needs the Q, K, V rows, which this page does not carry" +
                                  (data.notes.length ? ` (${data.notes.join("; ")}).` : ".")));
    return;
  }
  const i = state.query, n_q = e.q.length, n_k = e.k.length, r = attendOne(e, i);
  const keys = keyTokens(e);
  const lines = [
    "(3), (4)  Q^(h) = X W_{h,q},  K^(h) = Z W_{h,k},  V^(h) = Z W_{h,v}",
    "(5)  head_h = Attention(Q^(h), K^(h), V^(h)) = A^(h) V^(h)",
    "(6)  A^(h) = softmax(Q^(h) K^(h)ᵀ / √d_k), row by row: a_ij = exp(s_ij) / Σ_l exp(s_il)" +
      "   (the thesis's text divides by k; the code, as the paper, by √d_k)",
    "(10)  masked: softmax(M + Q^(h) K^(h)ᵀ / √d_k) V^(h),  M_ij = 0 where query i may see key j, −∞ where not",
    "(7)  MultiHead = Concat(head_1, …, head_H) W_c",
  ];
  view.append(...lines.map((line) => element("p", {class: "equation"}, line)));
  view.append(element("p", {id: "shapes"}, `shapes: Q^(h) ${n_q} × ${e.d_k}, K^(h) ${n_k} × ${e.d_k}, ` +
    `V^(h) ${n_k} × ${e.v[0].length}, scores and weights ${n_q} × ${n_k}; ` +
    `d_k = ${e.d_k}, √d_k = ${fixed(Math.sqrt(e.d_k))}`));
  const qLine = element("div", {}, `q_${i} (query ${i} “${queryTokens(e)[i]}”) = `);
  qLine.append(vector(r.q));
  view.append(qLine);
  const table = element("table", {class: "numbers", id: "equation-table"});
  const header = element("tr");
  for (const h of ["j", "key", "k_j", "q_i·k_j", "/√d_k", "M_ij", "a_ij = softmax", "model's a_ij", "v_j"]) {
    header.append(element("th", {}, h));
  }
  table.append(header);
  keys.forEach((token, j) => {
    const tr = element("tr", {class: r.allowed[j] ? "" : "masked"});
    const cells = [String(j), token, null, fixed(r.dots[j]), fixed(r.scores[j]), r.allowed[j] ? "0" : "−∞",
                   fixed(r.softmax[j]), fixed(e.weights[i][j]), null];
    cells.forEach((text, c) => {
      const td = element("td", c === 6 ? {class: "softmax"} : c === 7 ? {class: "model-weight"} : {});
      if (text === null) td.append(vector(c === 2 ? e.k[j] : e.v[j])); else td.textContent = text;
      tr.append(td);
    });
    table.append(tr);
  });
  view.append(table);
  const zLine = element("div", {id: "weighted-sum"},
                        `z_${i} = Σ_j a_ij v_j  (1 × ${r.z.length}, row ${i} of head_${e.head}) = `);
  zLine.append(vector(r.z));
  view.append(zLine);
}

// ---- replay: greedy decoding step by step, each step's cross-attention row beside its choice ---

function drawReplay(view) {
  if (!data.steps) { view.append(element("p", {}, "Replay is for a translation's greedy decoding.")); return; }
  const kind = "decoder_cross", layers = layersOf(kind);
  const layer = layers.includes(state.layer) ? state.layer : layers[0];
  const e = entry(kind, layer, state.head) || entry(kind, layer, 0);
  const t = Math.min(state.query, data.steps.length - 1), step = data.steps[t];
  const controls = element("p");
  const back = element("button", {id: "step-back"}, "◀ step");
  const next = element("button", {id: "step-next"}, "step ▶");
  back.addEventListener("click", () => { state.query = Math.max(0, t - 1); render(); });
  next.addEventListener("click", () => { state.query = Math.min(data.steps.length - 1, t + 1); render(); });
  controls.append(back, ` step ${t + 1} of ${data.steps.length} `, next);
  const sentence = element("p", {id: "replay-step"}, `read: ${step.prefix.join(" ")}  → chose `);
  sentence.append(element("span", {class: "chosen-token"}, step.chosen));
  view.append(controls, sentence, element("p", {}, `cross-attention of layer ${layer}, head ${e.head}, query ${t}:`));
  const source = keyTokens(e), row = shown(e)[t], width = 520, rowHeight = 18;
  const svg = svgElement("svg", {width, height: rowHeight * source.length + 10, xmlns: SVG});
  source.forEach((token, j) => {
    svg.append(svgElement("text", {x: 115, y: 14 + j * rowHeight, "text-anchor": "end", class: "token"}, token));
    svg.append(svgElement("rect", {x: 120, y: 3 + j * rowHeight, height: rowHeight - 4, width: 300 * row[j],
                                   class: "bar"}));
    svg.append(svgElement("text", {x: 125 + 300 * row[j], y: 14 + j * rowHeight, class: "token"}, fixed(row[j])));
  });
  view.append(svg);
}

// ---- export: the view on show as PNG or SVG, named after model, kind, layer and head ------------

function fileName(extension) {
  const model = (data.model || "model").split(/[\\/]/).filter(Boolean).pop() || "model";
  return `${model}-${state.kind}-layer${state.layer}-head${state.head}-${state.view}`.replace(/[^\w.-]+/g, "_") +
         `.${extension}`;
}

function download(url, extension) {
  const link = element("a", {href: url, download: fileName(extension)});
  document.body.append(link);
  link.click();
  link.remove();
}

// The matrix as SVG rectangles, with its token labels.
function matrixSVG(e) {
  const queries = queryTokens(e), keys = keyTokens(e), g = layout(queries.length, keys.length);
  const escape = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const parts = [`<svg xmlns="${SVG}" width="${g.width}" height="${g.height}" font-family="sans-serif" ` +
                 `font-size="11">`];
  shown(e).forEach((row, i) => row.forEach((w, j) => parts.push(
    `<rect x="${g.left + j * g.cell}" y="${g.top + i * g.cell}" width="${g.cell}" height="${g.cell}" ` +
    `fill="${colour(w)}"/>`)));
  const step = labelStep(g.cell);
  queries.forEach((t, i) => {
    if (i % step === 0) {
      parts.push(`<text x="${g.left - 4}" y="${g.top + (i + 0.7) * g.cell}" text-anchor="end">${escape(t)}</text>`);
    }
  });
  keys.forEach((t, j) => {
    const x = g.left + (j + 0.7) * g.cell;
    if (j % step === 0) parts.push(`<text transform="translate(${x},${g.top - 4}) rotate(-90)">${escape(t)}</text>`);
  });
  parts.push("</svg>");
  return parts.join("");
}

// The model view's thumbnails and labels drawn onto one canvas, in the grid's order.
function modelCanvas() {
  const thumbs = [...document.querySelectorAll("#model .thumb")], columns = headsOf(state.kind, state.layer).length;
  const width = 96, height = 96, rows = Math.ceil(thumbs.length / columns);
  const canvas = element("canvas", {width: columns * width, height: rows * height});
  const context = canvas.getContext("2d");
  context.fillStyle = "white";
  context.fillRect(0, 0, canvas.width, canvas.height);
  context.imageSmoothingEnabled = false;
  context.font = "11px sans-serif";
  context.textAlign = "center";
  thumbs.forEach((thumb, index) => {
    const x = (index % columns) * width, y = Math.floor(index / columns) * height;
    const image = thumb.querySelector("canvas");
    const w = parseFloat(image.style.width), h = parseFloat(image.style.height);
    context.drawImage(image, x + (width - w) / 2, y + 4, w, h);
    context.fillStyle = "#222";
    context.fillText(thumb.textContent, x + width / 2, y + 90);
  });
  return canvas;
}

// SVG text of the view on show: the matrix, the drawn SVG (head view, replay), or the model
// view's grid as an embedded PNG.
function viewSVG() {
  if (state.view === "model") {
    const canvas = modelCanvas();
    return `<svg xmlns="${SVG}" width="${canvas.width}" height="${canvas.height}">` +
           `<image href="${canvas.toDataURL("image/png")}" width="${canvas.width}" height="${canvas.height}"/></svg>`;
  }
  const drawn = $("view").querySelector("svg");
  return state.view !== "matrix" && drawn ? new XMLSerializer().serializeToString(drawn) : matrixSVG(current());
}

function exportSVG() {
  download(URL.createObjectURL(new Blob([viewSVG()], {type: "image/svg+xml"})), "svg");
}

function exportPNG() {
  const canvas = state.view === "model" ? modelCanvas() : $("matrix");
  if (canvas) { download(canvas.toDataURL("image/png"), "png"); return; }
  const image = new Image();                  // the head view and the replay: their SVG drawn onto a canvas
  const svg = viewSVG();
  image.onload = () => {
    const target = element("canvas", {width: image.width, height: image.height});
    const context = target.getContext("2d");
    context.fillStyle = "white";
    context.fillRect(0, 0, target.width, target.height);
    context.drawImage(image, 0, 0);
    download(target.toDataURL("image/png"), "png");
  };
  image.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(svg);
}

// ---- wiring: controls and keys -----------------------------------------------------------------

function move(list, value, by) { return list[(list.indexOf(value) + by + list.length) % list.length]; }

$("kind").addEventListener("change", (event) => { state.kind = event.target.value; render(); });
$("layer").addEventListener("change", (event) => { state.layer = Number(event.target.value); render(); });
$("head").addEventListener("change", (event) => { state.head = Number(event.target.value); render(); });
$("query").addEventListener("change", (event) => { state.query = Number(event.target.value); render(); });
$("approximation").addEventListener("change", (event) => { state.approximation = event.target.checked; render(); });
for (const button of document.querySelectorAll("#views button")) {
  button.addEventListener("click", () => { state.view = button.dataset.view; render(); });
}
$("export-png").addEventListener("click", exportPNG);
$("export-svg").addEventListener("click", exportSVG);

const VIEWS = ["model", "matrix", "heads", "equation", "replay"];
document.addEventListener("keydown", (event) => {
  if (["SELECT", "INPUT"].includes(document.activeElement.tagName) || event.ctrlKey || event.metaKey) return;
  const heads = headsOf(state.kind, state.layer), layers = layersOf(state.kind);
  const n = queryTokens(current()).length;
  const actions = {
    ArrowRight: () => { state.head = move(heads, state.head, 1); },
    ArrowLeft: () => { state.head = move(heads, state.head, -1); },
    ArrowDown: () => { state.layer = move(layers, state.layer, 1); },
    ArrowUp: () => { state.layer = move(layers, state.layer, -1); },
    k: () => { state.kind = move(kinds, state.kind, 1); },
    q: () => { state.query = (state.query + 1) % n; },
    Q: () => { state.query = (state.query - 1 + n) % n; },
    a: () => { state.approximation = !state.approximation; },
    h: () => { state.allHeads = !state.allHeads; },
  };
  VIEWS.forEach((view, index) => { actions[String(index + 1)] = () => { state.view = view; }; });
  if (!(event.key in actions)) return;
  event.preventDefault();
  actions[event.key]();
  render();
});

$("model-name").textContent = `${data.model} · ${data.task}`;
$("notes").textContent = data.notes.join(" · ");
render();
// Read by the browser test (tests/test_studio_browser.py) and printed in docs/chapter3.md.
window.studioTimings = {firstDraw: performance.now() - started};
