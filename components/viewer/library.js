// Niivue, loaded once from this folder's node_modules (installed by `make setup`).

const NIIVUE = './node_modules/@niivue/niivue/build/index.min.js'

// Niivue rebuilds a gradient texture of the whole volume (for 3D lighting) every time the
// background layer changes: on load and on every window/level step. This viewer never shows
// the 3D render, so the gradient is skipped (an option read by this one call site of the
// pinned version; if the text is not found the library runs unchanged). On a 512 x 512 x 300
// CT in software WebGL this makes loading and each contrast change about 4x faster.
const GRADIENT_CALL = '0===layer&&(this.volumeTexture=outTexture,this.gradientTexture=gradientGL({'
const GRADIENT_SKIP = '0===layer&&(this.volumeTexture=outTexture,this.gradientTexture=' +
  '(this.opts.m3bNoGradient?(()=>this.gradientTexture):gradientGL)({'
let library = null
export let gradientSkipped = false
export function loadLibrary () {
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
