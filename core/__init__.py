"""M3Builder's domain, one package per stage of the flow, in the order data moves through it:

config -> imaging -> privacy -> store -> datasets (layouts) -> jobs -> planning -> evaluation ->
training -> viewing -> external_validation; demo generates the demo data.

`core` imports no UI and none of `crew`, `tools`, `runtime` or `pages`. Importing it does
nothing else: each entry point calls :func:`core.config.bootstrap.apply` itself.
"""

__version__ = "0.1.0"
RESEARCH_ONLY = (
    "For research use only. Not a medical device; not for diagnosis or treatment decisions."
)
