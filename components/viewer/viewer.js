// M3Builder's image viewer: the Streamlit component (protocol v1, spoken by hand: no framework)
// around Niivue. Python sends `meta` (JSON) and the volumes as bytes: `image` and one
// `layer_<key>` per label layer (mask, prediction, boxes), each a gzip NIfTI on one grid.
// Everything after the first render happens here, without a Streamlit rerun: views, zoom, pan,
// window/level, label toggles, the slice scrubber, distance and ROI measurements.
// Niivue comes from this folder's node_modules (installed by `make setup`, pinned in
// package-lock.json); no request leaves the app's own server.

import { buildLayerControls, labelMap, refreshLayer, toggleLabel } from './layers.js'
import { gradientSkipped, loadLibrary } from './library.js'
import { Streamlit } from './protocol.js'
import { onDragRelease, onLocation, onMeasurement } from './readouts.js'
import { currentSlice, setSlice, sliceCount, updateScrubber } from './slices.js'
import { $, buffer, fmt, message, state, unit } from './state.js'

// ------------------------------------------------------------------ Niivue set-up
async function ensureViewer () {
  if (state.nv) return state.nv
  state.lib = await loadLibrary()
  const { Niivue, DRAG_MODE, SHOW_RENDER } = state.lib
  const nv = new Niivue({
    backColor: [0, 0, 0, 1],
    crosshairColor: [0.25, 0.72, 1.0, 0.75],
    crosshairWidthUnit: 'percent', // a hairline whatever the voxel size (not one voxel wide)
    crosshairWidth: 0.3,
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
  state.error = null
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
  fillPresets(meta)
  for (const button of document.querySelectorAll('#views button')) button.disabled = !meta.is3d
  document.querySelector('#tools [data-tool="roi"]').disabled = meta.rgb
  $('views').style.display = meta.is3d ? 'flex' : 'none'
  buildLayerControls()
  // the crosshair starts on the mask (its centre), else in the middle of the volume
  nv.scene.crosshairPos = Float32Array.from(meta.focus || [0.5, 0.5, 0.5])
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
    state.key = null
    if ($('message').textContent === 'Loading the image…') {
      message('This image could not be shown in the interactive viewer. Use the static view ' +
        '(the switch above the viewer).')
    }
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
    key: l.key,
    kind: l.kind,
    on: l.on,
    labels: l.labels.map((x) => ({ value: x.value, name: x.name, on: x.on }))
  })),
  sliceCount, currentSlice, setSlice, setView, setTool, setWindow, toggleLabel, zoomBy,
  window: () => (state.nv && state.nv.volumes[0] ? windowOf(state.nv.volumes[0]) : null)
}

wire()
Streamlit.ready()
