-- switchyard lsp for Neovim: diagnostics, hover, go to definition, completion,
-- rename, symbols and quick fixes in Switchyard graph files.
--
-- Copy to ~/.config/nvim/lua/switchyard.lua and put `require('switchyard').setup()` in
-- init.lua (`setup({ cmd = { '/path/to/switchyard', 'lsp' } })` for another binary). It
-- starts one server per graph directory for TOML buffers that look like graph files (a
-- `[graph]` table, or a path under `graphs/`). Neovim 0.7 or later; from 0.8 on
-- `vim.lsp.start` is used, which finds a running client itself.

local M = {}

M.config = {
  name = 'switchyard',
  -- The `switchyard` on PATH; give a full path to use another build.
  cmd = { 'switchyard', 'lsp' },
}

local function is_graph(buf)
  local name = vim.api.nvim_buf_get_name(buf)
  if name:match('/graphs/[^/]*%.toml$') then
    return true
  end
  for _, line in ipairs(vim.api.nvim_buf_get_lines(buf, 0, 200, false)) do
    if line:match('^%s*%[graph%]') then
      return true
    end
  end
  return false
end

-- One client per root directory (0.7 has no `vim.lsp.start` to find one for us).
local clients = {}

function M.attach(buf)
  buf = buf or vim.api.nvim_get_current_buf()
  if not is_graph(buf) then
    return
  end
  local root = vim.fn.fnamemodify(vim.api.nvim_buf_get_name(buf), ':p:h')
  local config = vim.tbl_extend('force', M.config, { root_dir = root })
  if vim.lsp.start then
    vim.lsp.start(config, { bufnr = buf })
    return
  end
  local id = clients[root]
  if not id or not vim.lsp.get_client_by_id(id) then
    id = vim.lsp.start_client(config)
    clients[root] = id
  end
  if id then
    vim.lsp.buf_attach_client(buf, id)
  end
end

function M.setup(opts)
  M.config = vim.tbl_extend('force', M.config, opts or {})
  vim.api.nvim_create_autocmd('FileType', {
    pattern = 'toml',
    callback = function(args)
      M.attach(args.buf)
    end,
  })
end

return M
