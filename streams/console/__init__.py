"""`tribunal console`: the whole control plane on live web pages (`server`), fed by the output topics (`feed`),
drawn by `pages`."""
