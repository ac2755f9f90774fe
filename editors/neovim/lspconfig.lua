-- switchyard lsp through nvim-lspconfig (https://github.com/neovim/nvim-lspconfig),
-- registered as a custom server. Put in init.lua after lspconfig is loaded.

local configs = require('lspconfig.configs')
local util = require('lspconfig.util')

if not configs.switchyard then
  configs.switchyard = {
    default_config = {
      cmd = { 'switchyard', 'lsp' },
      filetypes = { 'toml' },
      -- The directory of the graph file: its prompt and schema paths resolve from there.
      root_dir = function(fname)
        return util.root_pattern('graphs', '.git')(fname) or util.path.dirname(fname)
      end,
      single_file_support = true,
    },
    docs = {
      description = 'Switchyard graph files: `switchyard lsp`.',
    },
  }
end

require('lspconfig').switchyard.setup({})

-- On Neovim 0.11+, without lspconfig:
--   vim.lsp.config('switchyard', { cmd = { 'switchyard', 'lsp' }, filetypes = { 'toml' },
--                                 root_markers = { 'graphs', '.git' } })
--   vim.lsp.enable('switchyard')
