// The Streamlit component protocol (v1), spoken by hand: no framework, no build step.

export const Streamlit = {
  send (type, data = {}) {
    window.parent.postMessage({ isStreamlitMessage: true, type, ...data }, '*')
  },
  ready () { this.send('streamlit:componentReady', { apiVersion: 1 }) },
  height () {
    this.send('streamlit:setFrameHeight', { height: Math.ceil(document.body.scrollHeight) + 2 })
  }
}
