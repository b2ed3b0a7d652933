// The slice under the crosshair, the scrubber and stepping through slices.

import { $, state } from './state.js'

export const AXIS_OF_VIEW = { axial: 2, coronal: 1, sagittal: 0 }
export const VIEW_NAMES = ['sagittal', 'coronal', 'axial'] // by display (RAS) axis

export function scrubAxis () {
  if (state.view === 'multi') return state.meta ? state.meta.mainAxis : 2
  return AXIS_OF_VIEW[state.view] ?? 2
}

export function sliceCount (axis = scrubAxis()) {
  const volume = state.nv && state.nv.volumes[0]
  return volume ? volume.dimsRAS[axis + 1] : 0
}

export function currentSlice (axis = scrubAxis()) {
  const n = sliceCount(axis)
  if (!n) return 0
  return Math.min(n - 1, Math.max(0, Math.floor(state.nv.scene.crosshairPos[axis] * n)))
}

export function setSlice (index, axis = scrubAxis(), notify = true) {
  const nv = state.nv
  const n = sliceCount(axis)
  if (!n) return
  const k = Math.min(n - 1, Math.max(0, Math.round(index)))
  nv.scene.crosshairPos[axis] = (k + 0.5) / n
  nv.drawScene()
  if (notify) nv.createOnLocationChange(axis)
  updateScrubber()
}

export function updateScrubber () {
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
