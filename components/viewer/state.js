// What the viewer holds between renders, and small helpers the modules share.

export const $ = (id) => document.getElementById(id)

export const state = {
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

export function message (text) {
  const box = $('message')
  box.textContent = text || ''
  box.classList.toggle('shown', Boolean(text))
}

export function buffer (bytes) {
  if (!bytes) return null
  if (bytes instanceof ArrayBuffer) return bytes
  if (bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength) return bytes.buffer
  return bytes.slice().buffer
}

export function fmt (value, digits = 1) {
  if (value === null || value === undefined || Number.isNaN(value)) return '–'
  const abs = Math.abs(value)
  if (abs !== 0 && (abs < 0.01 || abs >= 1e5)) return value.toExponential(2)
  return Number(value).toFixed(abs >= 100 ? 0 : digits)
}

export function unit () { return state.meta && state.meta.unit ? ' ' + state.meta.unit : '' }
