// Label layers (mask, prediction, boxes): colours, opacity and each label on or off, all
// in the browser (no Streamlit rerun).

import { Streamlit } from './protocol.js'
import { $, state } from './state.js'

export function labelMap (layer) {
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

export function refreshLayer (layer) {
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

export function toggleLabel (layerKey, value, on) {
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

export function buildLayerControls () {
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
