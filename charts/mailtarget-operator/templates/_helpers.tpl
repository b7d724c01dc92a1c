{{/*
Names and labels shared by every template.
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "mailtarget-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name of the objects: fullnameOverride, else `<release>-<name>` (just `<release>` when
the release name already contains the chart name). Truncated to 63 characters (DNS label).
*/}}
{{- define "mailtarget-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* `<chart>-<version>` for the helm.sh/chart label. */}}
{{- define "mailtarget-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels that select the operator's pods (never change them between releases). */}}
{{- define "mailtarget-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mailtarget-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of every object the chart renders, besides its name, instance and component. */}}
{{- define "mailtarget-operator.sharedLabels" -}}
helm.sh/chart: {{ include "mailtarget-operator.chart" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: mailtarget-operator
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels of every object of the operator. */}}
{{- define "mailtarget-operator.labels" -}}
{{ include "mailtarget-operator.selectorLabels" . }}
app.kubernetes.io/component: operator
{{ include "mailtarget-operator.sharedLabels" . }}
{{- end }}

{{/*
Labels selecting the `helm test` Pod. Its name label differs from the operator's, so that neither
the Deployment, the metrics Service nor the PodDisruptionBudget selects it.
*/}}
{{- define "mailtarget-operator.testSelectorLabels" -}}
app.kubernetes.io/name: {{ include "mailtarget-operator.name" . | trunc 58 | trimSuffix "-" }}-test
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of the `helm test` Pod. */}}
{{- define "mailtarget-operator.testLabels" -}}
{{ include "mailtarget-operator.testSelectorLabels" . }}
app.kubernetes.io/component: test
{{ include "mailtarget-operator.sharedLabels" . }}
{{- end }}

{{/* The ServiceAccount the operator runs as. */}}
{{- define "mailtarget-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "mailtarget-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding the API key. */}}
{{- define "mailtarget-operator.credentialsSecret" -}}
{{- default (printf "%s-credentials" (include "mailtarget-operator.fullname" .)) .Values.credentials.existingSecret }}
{{- end }}

{{/* "true" when the chart creates the credentials Secret. */}}
{{- define "mailtarget-operator.createCredentials" -}}
{{- if and (not .Values.credentials.existingSecret) .Values.credentials.apiKey }}true{{ end }}
{{- end }}

{{/* The directory the credentials Secret is mounted at, and the API key file in it. */}}
{{- define "mailtarget-operator.credentialsDir" -}}
/var/run/secrets/mailtarget.co/credentials
{{- end }}
{{- define "mailtarget-operator.apiKeyFile" -}}
{{ include "mailtarget-operator.credentialsDir" . }}/api-key
{{- end }}

{{/* "configMap" or "secret": where api.caBundle comes from; empty without a CA bundle. */}}
{{- define "mailtarget-operator.caBundleSource" -}}
{{- if .Values.api.caBundle.configMap }}configMap{{ else if .Values.api.caBundle.secret }}secret{{ end }}
{{- end }}

{{/* The directory the CA bundle is mounted at, and the PEM file in it. */}}
{{- define "mailtarget-operator.caBundleDir" -}}
/etc/mailtarget-operator/ca
{{- end }}
{{- define "mailtarget-operator.caBundleFile" -}}
{{ include "mailtarget-operator.caBundleDir" . }}/ca.crt
{{- end }}

{{/*
Checks between values that values.schema.json cannot word readably (Helm prints a schema
failure as the keyword that failed, e.g. `maxLength: got 1, want 0`): each fails the install
with a sentence saying what to change.
*/}}
{{- define "mailtarget-operator.validate" -}}
{{- if and .Values.credentials.apiKey .Values.credentials.existingSecret }}
{{- fail "credentials.apiKey and credentials.existingSecret are both set: set only one. credentials.existingSecret names a Secret you manage; credentials.apiKey makes the chart create the Secret." }}
{{- end }}
{{- if and .Values.api.caBundle.configMap .Values.api.caBundle.secret }}
{{- fail "api.caBundle.configMap and api.caBundle.secret are both set: the CA bundle comes from one ConfigMap or one Secret; set only one." }}
{{- end }}
{{- if and .Values.rbac.create (not .Values.serviceAccount.create) (not .Values.serviceAccount.name) }}
{{- fail "serviceAccount.create is false and serviceAccount.name is empty: the operator's rights (the Secrets of the watched namespaces) would be bound to the namespace's default ServiceAccount, which every pod there runs as. Name the ServiceAccount to run as, or let the chart create one." }}
{{- end }}
{{- if and .Values.networkPolicy.enabled (not .Values.networkPolicy.kubernetesApi.cidrs) }}
{{- fail "networkPolicy.enabled needs networkPolicy.kubernetesApi.cidrs: the operator must reach the Kubernetes API, and a NetworkPolicy cannot name it. List the API server endpoint addresses, e.g. from `kubectl get endpointslices -n default -l kubernetes.io/service-name=kubernetes` (as /32 CIDRs)." }}
{{- end }}
{{- end }}

{{/* "true" when leader election is on: asked for, or needed by more than one replica. */}}
{{- define "mailtarget-operator.leaderElect" -}}
{{- if or .Values.leaderElection.enabled (gt (int .Values.replicaCount) 1) }}true{{ end }}
{{- end }}

{{/* The leader election Lease name. */}}
{{- define "mailtarget-operator.leaseName" -}}
{{- default (include "mailtarget-operator.fullname" .) .Values.leaderElection.leaseName }}
{{- end }}

{{/* The operator image: repository@digest, or repository:tag (tag defaults to appVersion). */}}
{{- define "mailtarget-operator.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* METRICS_ADDR: `host:port`, with brackets around an IPv6 host. */}}
{{- define "mailtarget-operator.metricsAddr" -}}
{{- if contains ":" .Values.metrics.bindAddress }}
{{- printf "[%s]:%d" .Values.metrics.bindAddress (int .Values.metrics.port) }}
{{- else }}
{{- printf "%s:%d" .Values.metrics.bindAddress (int .Values.metrics.port) }}
{{- end }}
{{- end }}

{{/*
The namespaced rules the operator needs wherever it reconciles objects: in a ClusterRole when it
watches every namespace, in a Role per watched namespace otherwise. Each rule says why; a test
derives the operator's API calls and checks these rules allow each of them and nothing more.
*/}}
{{- define "mailtarget-operator.reconcileRules" -}}
# The three controllers list and watch their kind (kube-rs Controller, one watch per kind; the
# ApiKey controller also watches SubAccounts to requeue keys that reference them); the accounts
# controller lists and watches Accounts.
- apiGroups: ["mailtarget.co"]
  resources: ["subaccounts", "apikeys", "sendingdomains", "accounts"]
  verbs: ["list", "watch"]
# An Account's status (Ready after an authenticated read, the key's scope) is written with
# server-side apply on the status subresource; after a 409 Conflict (another instance wrote it)
# the Account is read again.
- apiGroups: ["mailtarget.co"]
  resources: ["accounts/status"]
  verbs: ["patch"]
# The Account read again after that conflict.
- apiGroups: ["mailtarget.co"]
  resources: ["accounts"]
  verbs: ["get"]
# A resource naming a SubAccount in spec.subAccountRef reads it when the SubAccount cache lacks
# it (not created yet, another shard).
- apiGroups: ["mailtarget.co"]
  resources: ["subaccounts"]
  verbs: ["get"]
# An Account in use by managed resources carries the finalizer mailtarget.co/in-use (merge patch
# of the object), so that deleting it or its namespace waits for their cleanups.
- apiGroups: ["mailtarget.co"]
  resources: ["accounts"]
  verbs: ["patch"]
# The finalizer mailtarget.co/finalizer is added and removed with a JSON patch of the object; the
# identity annotations (mailtarget.co/external-id, mailtarget.co/create-pending) are written, and
# the object's resourceVersion checked before a call to the service, with merge patches.
- apiGroups: ["mailtarget.co"]
  resources: ["subaccounts", "apikeys", "sendingdomains"]
  verbs: ["patch"]
# Status (ids, DNS records, conditions) is written with server-side apply on the status
# subresource.
- apiGroups: ["mailtarget.co"]
  resources: ["subaccounts/status", "apikeys/status", "sendingdomains/status"]
  verbs: ["patch"]
# The controllers watch the Secrets they write (label app.kubernetes.io/managed-by=
# mailtarget-operator) to write a deleted or altered key again, and the metadata (never the
# data) of Secrets to check an Account again when its credentials Secret changes. RBAC cannot
# narrow a list or watch by label; set watchNamespaces to confine this to the listed namespaces.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["list", "watch"]
# An Account's key is read from the Secret it names. API key values and DKIM private keys are
# written to the Secrets named in the spec: read first, then server-side apply, which kube-apiserver authorizes as create when the Secret does
# not exist yet and as patch when it does.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "create", "patch"]
{{- if .Values.rbac.ownerReferencesPermissionEnforcement }}
# Only for the OwnerReferencesPermissionEnforcement admission plugin (OpenShift): it lets a
# client set ownerReferences on an object only when the client may delete that object. The
# operator itself never deletes a Secret; garbage collection removes them with their owner.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["delete"]
{{- end }}
# Events about the objects (created, adopted, failed) are published with events.k8s.io/v1;
# a repeated event is patched into a series.
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{/*
The cluster-wide rules of the accounts controller, in a ClusterRole in every layout (they grant
nothing namespaced: no Secret outside the release and watched namespaces). Each rule says why.
*/}}
{{- define "mailtarget-operator.clusterRules" -}}
# ClusterAccounts are cluster-scoped: the accounts controller lists and watches them.
- apiGroups: ["mailtarget.co"]
  resources: ["clusteraccounts"]
  verbs: ["list", "watch"]
# A ClusterAccount's status (Ready after an authenticated read, the key's scope) is written with
# server-side apply on the status subresource; after a 409 Conflict (another instance wrote it)
# the ClusterAccount is read again.
- apiGroups: ["mailtarget.co"]
  resources: ["clusteraccounts/status"]
  verbs: ["patch"]
# The ClusterAccount read again after that conflict.
- apiGroups: ["mailtarget.co"]
  resources: ["clusteraccounts"]
  verbs: ["get"]
# Namespace labels (metadata only) are read to evaluate a ClusterAccount's namespace selectors.
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["list", "watch"]
{{- end }}

{{/*
The rules in the release namespace where ClusterAccount credentials Secrets live, for the layout
with watchNamespaces (otherwise the ClusterRole's Secret rules cover that namespace).
*/}}
{{- define "mailtarget-operator.credentialRules" -}}
# A ClusterAccount's key is read from the Secret it names, and the metadata (never the data) of
# the namespace's Secrets is watched to check the ClusterAccount again when that Secret changes.
# RBAC cannot narrow a watch to the names ClusterAccounts will name.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch"]
{{- end }}
