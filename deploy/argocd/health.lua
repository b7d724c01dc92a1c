-- Argo CD health check for mailtarget.co SubAccount, ApiKey, SendingDomain, ClusterAccount and
-- Account objects. Install it in argocd-cm under
-- resource.customizations.health.mailtarget.co_<Kind> (see docs/gitops.md). Written for Lua 5.1,
-- the language of Argo CD's interpreter (gopher-lua).
--
-- The operator writes three conditions on every reconcile or account check: Ready, Reconciling
-- and Stalled, each with the metadata.generation it was computed from. Health, first match wins:
--   annotation mailtarget.co/paused: "true"             -> Suspended (not for the account
--                                                          kinds: nothing pauses their check)
--   no status, or no conditions yet                     -> Progressing
--   status or conditions computed for an older spec     -> Progressing
--   Stalled=True (needs a change by the user)           -> Degraded
--   Reconciling=True (creating, verifying DNS, retrying) -> Progressing
--   Ready=True                                          -> Healthy
--   anything else (Ready=False or Unknown)              -> Progressing

local hs = {}

local function condition(conditions, kind)
  for _, c in ipairs(conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function describe(c, fallback)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    return c.message
  end
  if c ~= nil and c.reason ~= nil and c.reason ~= "" then
    return c.reason
  end
  return fallback
end

-- The operator checks ClusterAccounts and Accounts whatever their annotations say.
local pausable = obj.kind ~= "ClusterAccount" and obj.kind ~= "Account"

local generation = nil
if obj.metadata ~= nil then
  generation = obj.metadata.generation
  local annotations = obj.metadata.annotations
  local paused = nil
  if annotations ~= nil then
    paused = annotations["mailtarget.co/paused"]
  end
  -- ASCII case ignored, as the operator reads it.
  if pausable and type(paused) == "string" and string.lower(paused) == "true" then
    hs.status = "Suspended"
    hs.message = "Reconciliation is paused by the mailtarget.co/paused annotation"
    return hs
  end
end

if obj.status == nil or obj.status.conditions == nil or #obj.status.conditions == 0 then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to report status"
  return hs
end

local conditions = obj.status.conditions
local observed = obj.status.observedGeneration
if generation ~= nil and observed ~= nil and observed ~= generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to reconcile generation " .. tostring(generation)
  return hs
end

for _, kind in ipairs({ "Ready", "Reconciling", "Stalled" }) do
  local c = condition(conditions, kind)
  if c ~= nil and generation ~= nil and c.observedGeneration ~= nil
      and c.observedGeneration ~= generation then
    hs.status = "Progressing"
    hs.message = "Waiting for the operator to reconcile generation " .. tostring(generation)
    return hs
  end
end

local stalled = condition(conditions, "Stalled")
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = describe(stalled, "Stalled")
  return hs
end

local reconciling = condition(conditions, "Reconciling")
if reconciling ~= nil and reconciling.status == "True" then
  hs.status = "Progressing"
  hs.message = describe(reconciling, "Reconciling")
  return hs
end

local ready = condition(conditions, "Ready")
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(ready, "Ready")
  return hs
end

hs.status = "Progressing"
hs.message = describe(ready, "Waiting for the Ready condition")
return hs
