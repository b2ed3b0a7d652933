// What is read out under the image: position and value, distances, ROI statistics.

import { Streamlit } from './protocol.js'
import { updateScrubber } from './slices.js'
import { $, fmt, state, unit } from './state.js'

export function onLocation (location) {
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

export function addResult (text) {
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

export function onMeasurement (measurement) {
  state.lastDistance = measurement.distance
  const view = ['axial', 'coronal', 'sagittal'][measurement.sliceType] || ''
  const where = view && state.meta.is3d ? ` (${view})` : ''
  addResult(`Distance ${fmt(measurement.distance, 1)} mm${where}`)
}

export function onDragRelease (params) {
  if (state.tool !== 'roi' || params.tileIdx < 0 || state.meta.rgb) return
  const start = Array.from(params.voxStart).map(Math.round)
  const end = Array.from(params.voxEnd).map(Math.round)
  if (start.every((v, i) => v === end[i])) return
  // Niivue's statistics of the image inside the ellipse dragged on one slice
  const stats = state.nv.getDescriptives({
    layer: 0, roiIsMask: true, startVox: start, endVox: end
  })
  if (!stats || !stats.nvox) return
  state.lastRoi = stats
  const area = stats.area ? `, area ${fmt(stats.area, 1)} mm²` : ''
  addResult(`ROI mean ${fmt(stats.mean, 1)}${unit()} (SD ${fmt(stats.stdev, 1)}, ` +
    `min ${fmt(stats.min, 0)}, max ${fmt(stats.max, 0)}${area}, ${stats.nvox} voxels)`)
}
