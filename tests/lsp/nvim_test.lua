-- Drives `switchyard lsp` from Neovim (0.7 and later), as a person's editor would:
-- starts the server with vim.lsp.start_client, opens a graph, waits for its
-- diagnostics, asks for a definition and a hover, writes what came back as JSON, quits.
--
--   SWITCHYARD_BIN=target/debug/switchyard SWITCHYARD_GRAPH=graph.toml \
--   SWITCHYARD_DEF_LINE=10 SWITCHYARD_DEF_CHAR=9 SWITCHYARD_OUT=out.json \
--   nvim --headless --clean -u NONE -c 'luafile tests/lsp/nvim_test.lua'
--
-- Lines and characters are 0-based, as the protocol counts them. Whatever happens,
-- the JSON is written (with `error` when something failed) and Neovim quits.

local env = function(name)
  local v = os.getenv(name)
  if v == nil or v == '' then
    error('set ' .. name)
  end
  return v
end

local result = { ok = false }

local function write(path)
  local f = assert(io.open(path, 'w'))
  f:write(vim.fn.json_encode(result))
  f:close()
end

local function run()
  local bin, graph = env('SWITCHYARD_BIN'), env('SWITCHYARD_GRAPH')
  local line, char = tonumber(env('SWITCHYARD_DEF_LINE')), tonumber(env('SWITCHYARD_DEF_CHAR'))
  vim.cmd('edit ' .. vim.fn.fnameescape(graph))
  local buf = vim.api.nvim_get_current_buf()
  local id = vim.lsp.start_client({
    name = 'switchyard',
    cmd = { bin, 'lsp' },
    root_dir = vim.fn.fnamemodify(graph, ':p:h'),
  })
  assert(id, 'the client did not start')
  result.client_id = id
  assert(vim.lsp.buf_attach_client(buf, id), 'the client did not attach')

  local arrived = vim.wait(15000, function()
    return #vim.diagnostic.get(buf) > 0
  end, 20)
  assert(arrived, 'no diagnostics within 15 s')
  result.diagnostics = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    table.insert(result.diagnostics, {
      lnum = d.lnum,
      col = d.col,
      end_lnum = d.end_lnum,
      end_col = d.end_col,
      severity = d.severity,
      code = d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code),
      message = d.message,
    })
  end

  local at = {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    position = { line = line, character = char },
  }
  local answers, err = vim.lsp.buf_request_sync(buf, 'textDocument/definition', at, 10000)
  assert(answers, 'no definition: ' .. tostring(err))
  local answer = answers[id]
  assert(answer and not answer.error, 'definition failed: ' .. vim.inspect(answer))
  local loc = answer.result
  if loc and loc[1] then
    loc = loc[1]
  end
  result.definition = loc or vim.NIL

  local hovers = vim.lsp.buf_request_sync(buf, 'textDocument/hover', at, 10000) or {}
  local hover = hovers[id] and hovers[id].result
  result.hover = hover and hover.contents and hover.contents.value or vim.NIL

  vim.lsp.stop_client(id)
  vim.wait(2000, function()
    return vim.lsp.get_client_by_id(id) == nil
  end, 20)
  result.ok = true
end

local ok, err = pcall(run)
if not ok then
  result.error = tostring(err)
end
local out = os.getenv('SWITCHYARD_OUT') or 'nvim_test.json'
pcall(write, out)
vim.cmd('qall!')
