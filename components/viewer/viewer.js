// M3Builder's image viewer: the Streamlit component (protocol v1, spoken by hand: no framework)
// around Niivue. Python sends `meta` (JSON) and the volumes as bytes: `image` and one
// `layer_<key>` per label layer (mask, prediction, boxes), each a gzip NIfTI on one grid.
// Everything after the first render happens here, without a Streamlit rerun: views, zoom, pan,
// window/level, label toggles, the slice scrubber, distance and ROI measurements.
// Niivue comes from this folder's node_modules (installed by `make setup`, pinned in
// package-lock.json); no request leaves the app's own server.

const NIIVUE = './node_modules/@niivue/niivue/build/index.min.js'
const AXIS_OF_VIEW = { axial: 2, coronal: 1, sagittal: 0 }
const VIEW_NAMES = ['sagittal', 'coronal', 'axial']

const $ = (id) => document.getElementById(id)

// ------------------------------------------------------------------ Streamlit protocol (v1)
const Streamlit = {
  send (type, data = {}) {
    window.parent.postMessage({ isStreamlitMessage: true, type, ...data }, '*')
  },
  ready () { this.send('streamlit:componentReady', { apiVersion: 1 }) },
  height () {
    this.send('streamlit:setFrameHeight', { height: Math.ceil(document.body.scrollHeight) + 2 })
  }
}

// ------------------------------------------------------------------ the library
// Niivue rebuilds a gradient texture of the whole volume (for 3D lighting) every time the
// background layer changes: on load and on every window/level step. This viewer never shows
// the 3D render, so the gradient is skipped (an option read by this one call site of the
// pinned version; if the text is not found the library runs unchanged). On a 512 x 512 x 300
// CT in software WebGL this makes loading and each contrast change about 4x faster.
const GRADIENT_CALL = '0===layer&&(this.volumeTexture=outTexture,this.gradientTexture=gradientGL({'
const GRADIENT_SKIP = '0===layer&&(this.volumeTexture=outTexture,this.gradientTexture=' +
  '(this.opts.m3bNoGradient?(()=>this.gradientTexture):gradientGL)({'
let library = null
let gradientSkipped = false
function loadLibrary () {
  // the package's self-contained ESM build is a string (one module, no imports): load it once
  if (!library) {
    library = (async () => {
      const { esm } = await import(NIIVUE)
      let source = decodeURIComponent(esm)
      gradientSkipped = source.includes(GRADIENT_CALL)
      if (gradientSkipped) source = source.replace(GRADIENT_CALL, GRADIENT_SKIP)
      const url = URL.createObjectURL(new Blob([source], { type: 'text/javascript' }))
      try { return await import(url) } finally { URL.revokeObjectURL(url) }
    })()
  }
  return library
}

// ------------------------------------------------------------------ state
const state = {
  lib: null,
  nv: null,
  key: null,
  meta: null,
  view: 'multi',
  tool: 'crosshair',
  layers: [], // {key, title, kind ('drawing' | 'volume'), volume, opacity, on, labels}
  results: [], // lines shown under the image: distances and ROI statistics
  lastRoi: null,
  lastDistance: null,
  timings: null,
  error: null
}

function message (text) {
  const box = $('message')
  box.textContent = text || ''
  box.classList.toggle('shown', Boolean(text))
}

function buffer (bytes) {
  if (!bytes) return null
  if (bytes instanceof ArrayBuffer) return bytes
  if (bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength) return bytes.buffer
  return bytes.slice().buffer
}

function fmt (value, digits = 1) {
  if (value === null || value === undefined || Number.isNaN(value)) return '–'
  const abs = Math.abs(value)
  if (abs !== 0 && (abs < 0.01 || abs >= 1e5)) return value.toExponential(2)
  return Number(value).toFixed(abs >= 100 ? 0 : digits)
}

function unit () { return state.meta && state.meta.unit ? ' ' + state.meta.unit : '' }

// ------------------------------------------------------------------ Niivue set-up
async function ensureViewer () {
  if (state.nv) return state.nv
  state.lib = await loadLibrary()
  const { Niivue, DRAG_MODE, SHOW_RENDER } = state.lib
  const nv = new Niivue({
    backColor: [0, 0, 0, 1],
    crosshairColor: [0.25, 0.72, 1.0, 0.75],
    crosshairWidth: 1,
    show3Dcrosshair: false,
    isColorbar: false,
    isOrientCube: false,
    isRuler: false,
    dragAndDropEnabled: false,
    multiplanarShowRender: SHOW_RENDER.NEVER,
    isRadiologicalConvention: true, // patient's right on the viewer's left, as in PACS
    isNearestInterpolation: false, // smooth when enlarged; labels stay crisp
    dragMode: DRAG_MODE.windowing,
    showMeasureUnits: true,
    measureTextColor: [1, 1, 0.3, 1],
    measureLineColor: [1, 1, 0.3, 1],
    selectionBoxColor: [1, 1, 0.3, 0.35],
    loadingText: '',
    logLevel: 'error',
    tileMargin: 4,
    multiplanarPadPixels: 4
  })
  nv.opts.m3bNoGradient = true
  await nv.attachToCanvas($('gl'), false) // no MSAA: slices need none, software GL is faster
  nv.onLocationChange = onLocation
  nv.onMeasurementCompleted = onMeasurement
  nv.onDragRelease = onDragRelease
  nv.onIntensityChange = () => showWindow()
  state.nv = nv
  setTool(state.tool)
  return nv
}

function setTool (name) {
  state.tool = name
  const nv = state.nv
  if (nv) {
    const D = state.lib.DRAG_MODE
    const primary = {
      crosshair: D.crosshair,
      windowing: D.windowing,
      pan: D.pan,
      measure: D.measurement,
      roi: D.roiSelection
    }[name]
    nv.setMouseEventConfig({
      leftButton: { primary, withShift: D.pan, withCtrl: D.crosshair },
      rightButton: D.windowing,
      centerButton: D.pan
    })
  }
  for (const button of document.querySelectorAll('#tools button')) {
    button.classList.toggle('active', button.dataset.tool === name)
  }
}

function setView (name) {
  const nv = state.nv
  if (!nv || !state.meta) return
  if (!state.meta.is3d) name = 'axial'
  state.view = name
  const { SLICE_TYPE } = state.lib
  nv.setSliceType(name === 'multi' ? SLICE_TYPE.MULTIPLANAR : SLICE_TYPE[name.toUpperCase()])
  for (const button of document.querySelectorAll('#views button')) {
    button.classList.toggle('active', button.dataset.view === name)
  }
  updateScrubber()
}

// ------------------------------------------------------------------ slices
function scrubAxis () {
  if (state.view === 'multi') return state.meta ? state.meta.mainAxis : 2
  return AXIS_OF_VIEW[state.view] ?? 2
}

function sliceCount (axis = scrubAxis()) {
  const volume = state.nv && state.nv.volumes[0]
  return volume ? volume.dimsRAS[axis + 1] : 0
}

function currentSlice (axis = scrubAxis()) {
  const n = sliceCount(axis)
  if (!n) return 0
  return Math.min(n - 1, Math.max(0, Math.floor(state.nv.scene.crosshairPos[axis] * n)))
}

function setSlice (index, axis = scrubAxis(), notify = true) {
  const nv = state.nv
  const n = sliceCount(axis)
  if (!n) return
  const k = Math.min(n - 1, Math.max(0, Math.round(index)))
  nv.scene.crosshairPos[axis] = (k + 0.5) / n
  nv.drawScene()
  if (notify) nv.createOnLocationChange(axis)
  updateScrubber()
}

function updateScrubber () {
  const show = state.meta && state.meta.is3d
  $('scrubber').style.display = show ? 'flex' : 'none'
  if (!show || !state.nv || !state.nv.volumes.length) return
  const axis = scrubAxis()
  const n = sliceCount(axis)
  const k = currentSlice(axis)
  const input = $('slice')
  input.max = String(Math.max(0, n - 1))
  if (document.activeElement !== input || input.value !== String(k)) input.value = String(k)
  const view = VIEW_NAMES[axis]
  $('slice-label').textContent = view.charAt(0).toUpperCase() + view.slice(1)
  $('slice-text').textContent = `${k + 1} / ${n}`
}

// ------------------------------------------------------------------ window / level
function windowOf (volume) {
  return [volume.cal_max - volume.cal_min, (volume.cal_max + volume.cal_min) / 2]
}

function setWindow (width, level) {
  const volume = state.nv && state.nv.volumes[0]
  if (!volume) return
  volume.cal_min = level - width / 2
  volume.cal_max = level + width / 2
  state.nv.updateGLVolume()
  showWindow()
}

function showWindow () {
  const volume = state.nv && state.nv.volumes[0]
  if (!volume || state.meta.rgb) { $('wl').textContent = ''; return }
  const [w, l] = windowOf(volume)
  $('wl').textContent = `W ${fmt(w)} / L ${fmt(l)}${unit()}`
}

function fillPresets (meta) {
  const select = $('preset')
  select.replaceChildren()
  for (const preset of meta.presets) {
    const option = document.createElement('option')
    option.value = preset.name
    option.textContent = preset.name
    select.appendChild(option)
  }
  select.value = meta.preset
  $('window-group').style.display = meta.rgb ? 'none' : 'flex'
}

// ------------------------------------------------------------------ label layers
function labelMap (layer) {
  // one LUT entry per label value present; a label switched off (or its whole layer) gets
  // alpha 0, so each label is an overlay of its own without a second volume
  const entries = [{ value: 0, color: '#000000', name: '', on: false }, ...layer.labels]
  const rgb = entries.map((e) => [1, 3, 5].map((i) => parseInt(e.color.slice(i, i + 2), 16)))
  return {
    R: rgb.map((c) => c[0]),
    G: rgb.map((c) => c[1]),
    B: rgb.map((c) => c[2]),
    A: entries.map((e) => (e.value > 0 && e.on && layer.on ? 255 : 0)),
    I: entries.map((e) => e.value),
    labels: entries.map((e) => e.name)
  }
}

function refreshLayer (layer) {
  const nv = state.nv
  if (layer.kind === 'drawing') {
    // the drawing's colours are a lookup table on the GPU: swapping it redraws nothing else
    nv.drawLut = state.lib.cmapper.makeDrawLut(labelMap(layer))
    nv.drawOpacity = layer.on ? layer.opacity : 0
    nv.refreshColormaps()
    nv.drawScene()
    return
  }
  layer.volume.setColormapLabel(labelMap(layer))
  layer.volume.opacity = layer.on ? layer.opacity : 0
  nv.updateGLVolume()
}

function toggleLabel (layerKey, value, on) {
  const layer = state.layers.find((l) => l.key === layerKey)
  if (!layer) return false
  if (value === null || value === undefined) {
    layer.on = on
  } else {
    const label = layer.labels.find((l) => l.value === value)
    if (!label) return false
    label.on = on
  }
  refreshLayer(layer)
  buildLayerControls()
  return true
}

function buildLayerControls () {
  const box = $('layers')
  box.replaceChildren()
  for (const layer of state.layers) {
    const row = document.createElement('div')
    row.className = 'layer'
    row.dataset.layer = layer.key
    const head = document.createElement('label')
    head.className = 'title'
    const all = document.createElement('input')
    all.type = 'checkbox'
    all.checked = layer.on
    all.setAttribute('aria-label', layer.title)
    all.addEventListener('change', () => toggleLabel(layer.key, null, all.checked))
    head.append(all, ' ' + layer.title)
    const opacity = document.createElement('input')
    opacity.type = 'range'
    opacity.min = '0'
    opacity.max = '1'
    opacity.step = '0.05'
    opacity.value = String(layer.opacity)
    opacity.title = 'Opacity'
    opacity.setAttribute('aria-label', `${layer.title} opacity`)
    opacity.addEventListener('input', () => {
      layer.opacity = Number(opacity.value)
      refreshLayer(layer)
    })
    row.append(head, opacity)
    for (const label of layer.labels) {
      const item = document.createElement('label')
      item.className = 'label'
      const box = document.createElement('input')
      box.type = 'checkbox'
      box.checked = label.on
      box.disabled = !layer.on
      box.dataset.value = String(label.value)
      box.addEventListener('change', () => toggleLabel(layer.key, label.value, box.checked))
      const swatch = document.createElement('span')
      swatch.className = 'swatch'
      swatch.style.background = label.color
      item.append(box, swatch, label.name)
      row.appendChild(item)
    }
    box.appendChild(row)
  }
  Streamlit.height()
}

// ------------------------------------------------------------------ readouts
function onLocation (location) {
  if (!state.meta || !location || !location.values) return
  const parts = []
  const mm = location.mm
  if (mm && state.meta.is3d) parts.push(`${fmt(mm[0])}, ${fmt(mm[1])}, ${fmt(mm[2])} mm`)
  const image = location.values[0]
  if (image && !state.meta.rgb) parts.push(`value ${fmt(image.value, 1)}${unit()}`)
  let overlay = 0
  state.layers.forEach((layer) => {
    let v = 0
    if (layer.kind === 'drawing') {
      const dims = state.nv.back.dims
      const [x, y, z] = Array.from(location.vox).map(Math.round)
      v = state.nv.drawBitmap ? state.nv.drawBitmap[x + dims[1] * (y + dims[2] * z)] || 0 : 0
    } else {
      overlay += 1
      v = location.values[overlay] ? Math.round(location.values[overlay].value) : 0
    }
    const label = layer.labels.find((l) => l.value === v)
    if (label && layer.on && label.on) parts.push(`${layer.title.toLowerCase()}: ${label.name}`)
  })
  $('position').textContent = parts.join(' · ')
  updateScrubber()
}

function addResult (text) {
  state.results.unshift(text)
  state.results = state.results.slice(0, 4)
  const box = $('results')
  box.replaceChildren(...state.results.map((line) => {
    const div = document.createElement('div')
    div.textContent = line
    return div
  }))
  Streamlit.height()
}

function onMeasurement (measurement) {
  state.lastDistance = measurement.distance
  const view = ['axial', 'coronal', 'sagittal'][measurement.sliceType] || ''
  addResult(`Distance ${fmt(measurement.distance, 1)} mm` + (view && state.meta.is3d ? ` (${view})` : ''))
}

function onDragRelease (params) {
  if (state.tool !== 'roi' || params.tileIdx < 0 || state.meta.rgb) return
  const start = Array.from(params.voxStart).map(Math.round)
  const end = Array.from(params.voxEnd).map(Math.round)
  if (start.every((v, i) => v === end[i])) return
  const stats = state.nv.getDescriptives({ layer: 0, roiIsMask: true, startVox: start, endVox: end })
  if (!stats || !stats.nvox) return
  state.lastRoi = stats
  const area = stats.area ? `, area ${fmt(stats.area, 1)} mm²` : ''
  addResult(`ROI mean ${fmt(stats.mean, 1)}${unit()} (SD ${fmt(stats.stdev, 1)}, ` +
    `min ${fmt(stats.min, 0)}, max ${fmt(stats.max, 0)}${area}, ${stats.nvox} voxels)`)
}

// ------------------------------------------------------------------ zoom
function zoomBy (factor) {
  const nv = state.nv
  if (!nv) return
  const pan = nv.scene.pan2Dxyzmm
  nv.setPan2Dxyzmm([pan[0], pan[1], pan[2], Math.min(20, Math.max(0.2, pan[3] * factor))])
}

function reset () {
  const nv = state.nv
  if (!nv || !state.meta) return
  nv.setPan2Dxyzmm([0, 0, 0, 1])
  const preset = state.meta.presets.find((p) => p.name === state.meta.preset)
  if (preset) setWindow(preset.width, preset.level)
  $('preset').value = state.meta.preset
  nv.clearAllMeasurements()
  state.results = []
  $('results').replaceChildren()
  nv.drawScene()
}

// ------------------------------------------------------------------ render
async function render (args) {
  const meta = args.meta
  $('stage').style.height = `${meta.height || 560}px`
  if (meta.key === state.key) { Streamlit.height(); return }
  const t0 = performance.now()
  const timings = { startedAt: performance.timeOrigin + t0 } // epoch ms: the bytes arrived
  const mark = (name) => { timings[name] = Math.round(performance.now() - t0) }
  message('Loading the image…')
  Streamlit.height()
  let nv
  try {
    nv = await ensureViewer()
  } catch (err) {
    state.error = String(err)
    message(/webgl/i.test(String(err))
      ? 'This browser cannot show the interactive viewer: WebGL2 is turned off or missing. ' +
        'Turn on hardware acceleration, or use the static view.'
      : 'The interactive viewer could not start here. Use the static view (the switch ' +
        'above the viewer).')
    throw err
  }
  mark('library')
  const { NVImage } = state.lib
  if (nv.drawBitmap) nv.closeDrawing()
  state.meta = meta
  state.layers = []
  state.results = []
  $('results').replaceChildren()
  nv.clearAllMeasurements()
  const [width, level] = meta.window
  const image = await NVImage.new(buffer(args.image), 'image.nii.gz', meta.rgb ? '' : 'gray', 1,
    null, level - width / 2, level + width / 2, true)
  mark('imageDecoded')
  // The first label layer (8-bit) is Niivue's drawing: a label texture coloured on the fly,
  // so switching a label off recolours without rebuilding any 3D texture. Further layers
  // (a prediction beside a mask) are overlay volumes with a label colour table.
  const overlays = []
  let drawing = null
  for (const spec of meta.layers) {
    const bytes = args[`layer_${spec.key}`]
    if (!bytes) continue
    const volume = await NVImage.new(buffer(bytes), `${spec.key}.nii.gz`, '', spec.opacity)
    const layer = {
      key: spec.key,
      title: spec.title,
      volume,
      kind: !drawing && volume.img instanceof Uint8Array ? 'drawing' : 'volume',
      opacity: spec.opacity,
      on: true,
      labels: spec.labels.map((l) => ({ ...l, on: true }))
    }
    if (layer.kind === 'drawing') {
      drawing = layer
    } else {
      volume.setColormapLabel(labelMap(layer))
      overlays.push(volume)
    }
    state.layers.push(layer)
    mark(`decoded_${spec.key}`)
  }
  // all volumes at once: addVolume would rebuild every layer's texture on each call
  nv.volumes = [image, ...overlays]
  nv.back = image
  nv.overlays = overlays
  nv.updateGLVolume()
  mark('imageShown')
  if (drawing) {
    nv.loadDrawing(drawing.volume)
    refreshLayer(drawing)
    mark('drawing')
  }
  nv.opts.isOrientationTextVisible = Boolean(meta.oriented && meta.is3d)
  // a 2D image keeps a faint crosshair: it marks the point whose value is read out
  nv.opts.crosshairColor = [0.25, 0.72, 1.0, meta.is3d ? 0.75 : 0.3]
  fillPresets(meta)
  for (const button of document.querySelectorAll('#views button')) button.disabled = !meta.is3d
  document.querySelector('#tools [data-tool="roi"]').disabled = meta.rgb
  $('views').style.display = meta.is3d ? 'flex' : 'none'
  buildLayerControls()
  if (meta.focus) {
    nv.scene.crosshairPos = Float32Array.from(meta.focus)
  }
  setView(meta.is3d ? (meta.view || 'multi') : 'axial')
  nv.setPan2Dxyzmm([0, 0, 0, 1])
  nv.createOnLocationChange()
  showWindow()
  state.key = meta.key
  mark('done')
  requestAnimationFrame(() => requestAnimationFrame(() => mark('firstFrame')))
  state.timings = timings
  message('')
  Streamlit.height()
}

// ------------------------------------------------------------------ controls
function wire () {
  for (const button of document.querySelectorAll('#views button')) {
    button.addEventListener('click', () => setView(button.dataset.view))
  }
  for (const button of document.querySelectorAll('#tools button')) {
    button.addEventListener('click', () => setTool(button.dataset.tool))
  }
  $('preset').addEventListener('change', (e) => {
    const preset = state.meta.presets.find((p) => p.name === e.target.value)
    if (preset) setWindow(preset.width, preset.level)
  })
  $('slice').addEventListener('input', (e) => setSlice(Number(e.target.value)))
  $('zoom-in').addEventListener('click', () => zoomBy(1.25))
  $('zoom-out').addEventListener('click', () => zoomBy(1 / 1.25))
  $('reset').addEventListener('click', reset)
  const canvas = $('gl')
  // Niivue focuses the canvas on every click and wheel step; a plain focus() scrolls the app's
  // page to bring the viewer into view, moving the image under the mouse while scrolling
  canvas.focus = () => HTMLElement.prototype.focus.call(canvas, { preventScroll: true })
  // Ctrl (or Cmd) + wheel zooms; a plain wheel scrolls slices (Niivue's own handler)
  canvas.addEventListener('wheel', (e) => {
    if (!(e.ctrlKey || e.metaKey)) return
    e.preventDefault()
    e.stopImmediatePropagation()
    zoomBy(e.deltaY < 0 ? 1.1 : 1 / 1.1)
  }, { capture: true, passive: false })
  canvas.addEventListener('pointermove', (e) => { if (e.buttons) showWindow() })
  canvas.addEventListener('pointerup', () => { showWindow(); updateScrubber() })
  canvas.addEventListener('contextmenu', (e) => e.preventDefault())
  new ResizeObserver(() => Streamlit.height()).observe(document.body)
}

// ------------------------------------------------------------------ entry
let queue = Promise.resolve()
window.addEventListener('message', (event) => {
  const data = event.data
  if (!data || data.type !== 'streamlit:render') return
  queue = queue.then(() => render(data.args)).catch((err) => {
    state.error = String(err && err.stack ? err.stack : err)
    console.error(err)
  })
})

// what tests and benchmarks drive (the same functions the controls call)
window.m3bViewer = {
  get ready () { return state.key !== null },
  get key () { return state.key },
  get error () { return state.error },
  get nv () { return state.nv },
  get view () { return state.view },
  get tool () { return state.tool },
  get lastRoi () { return state.lastRoi },
  get lastDistance () { return state.lastDistance },
  get results () { return [...state.results] },
  get timings () { return state.timings },
  get gradientSkipped () { return gradientSkipped },
  layers: () => state.layers.map((l) => ({
    key: l.key, kind: l.kind, on: l.on, labels: l.labels.map((x) => ({ value: x.value, name: x.name, on: x.on }))
  })),
  sliceCount, currentSlice, setSlice, setView, setTool, setWindow, toggleLabel, zoomBy,
  window: () => (state.nv && state.nv.volumes[0] ? windowOf(state.nv.volumes[0]) : null)
}

wire()
Streamlit.ready()
