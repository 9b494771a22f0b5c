{{/* The chart's name. */}}
{{- define "kubeplace.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Objects' names: the release's name when it holds the chart's name, else <release>-<chart>. */}}
{{- define "kubeplace.fullname" -}}
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

{{- define "kubeplace.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kubeplace.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is needed when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "kubeplace.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubeplace.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kubeplace.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kubeplace.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ default .Release.Service .Values.managedBy }}
{{- end }}

{{- define "kubeplace.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end }}

{{/*
What placement reads: pending and bound pods, node capacity, namespace labels (tenants), and what
the volume, disruption, priority, gang and default spread rules read. One list for serve/plan/bind and rebalance.
*/}}
{{- define "kubeplace.readRules" -}}
# What a snapshot reads: pending and bound pods, node capacity, namespace labels (tenants),
# and what the volume, device, disruption, priority, gang and default spread rules read.
- apiGroups: [""]
  resources: [pods, nodes, namespaces, persistentvolumeclaims, persistentvolumes, services, replicationcontrollers]
  verbs: [get, list, watch]
# The default topology spread constraints select pods as their Services and controllers do.
- apiGroups: [apps]
  resources: [replicasets, statefulsets]
  verbs: [get, list, watch]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, list, watch]
- apiGroups: [storage.k8s.io]
  resources: [storageclasses, csinodes, csidrivers, csistoragecapacities, volumeattachments]
  verbs: [get, list, watch]
- apiGroups: [scheduling.k8s.io]
  resources: [priorityclasses, podgroups]
  verbs: [get, list, watch]
- apiGroups: [resource.k8s.io]
  resources: [deviceclasses, resourceslices, resourceclaims, resourceclaimtemplates]
  verbs: [get, list, watch]
# Gangs: the PodGroups of scheduler-plugins, Volcano and KAI-Scheduler (the Workload API's above), the
# Jobs and LeaderWorkerSets whose exclusive-topology leaders get room held for their followers.
- apiGroups: [scheduling.x-k8s.io, scheduling.sigs.k8s.io, scheduling.volcano.sh, scheduling.run.ai]
  resources: [podgroups]
  verbs: [get, list, watch]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch]
- apiGroups: [leaderworkerset.x-k8s.io]
  resources: [leaderworkersets]
  verbs: [get, list, watch]
# Kueue's Workloads: the room promised to the pods it still gates (topology-aware scheduling).
- apiGroups: [kueue.x-k8s.io]
  resources: [workloads]
  verbs: [get, list, watch]
# What adding nodes reads: Karpenter's NodePools and NodeClaims, and the DaemonSets whose pods each
# new node would run.
- apiGroups: [karpenter.sh]
  resources: [nodepools, nodeclaims]
  verbs: [get, list, watch]
- apiGroups: [apps]
  resources: [daemonsets]
  verbs: [get, list, watch]
# Measured usage (metrics-server's NodeMetrics and PodMetrics) for LoadAware and Overcommit;
# the metrics API has no watch. Without metrics-server kubeplace warns once and uses requests.
- apiGroups: [metrics.k8s.io]
  resources: [nodes, pods]
  verbs: [get, list]
{{- end }}

{{/* The pod-level and container-level security settings both workloads run with. */}}
{{- define "kubeplace.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.runAsUser }}
runAsGroup: {{ .Values.runAsUser }}
seccompProfile: {type: RuntimeDefault}
{{- end }}

{{- define "kubeplace.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: [ALL]}
{{- end }}

{{/* Scheduling constraints of a workload: its values' nodeSelector, tolerations and affinity. */}}
{{- define "kubeplace.placement" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
