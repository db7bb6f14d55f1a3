{{- define "hollo-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "hollo-operator.labels" -}}
app.kubernetes.io/name: hollo-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "hollo-operator.selector" -}}
app.kubernetes.io/name: hollo-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "hollo-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "hollo-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The rules the operator needs: exactly the API calls its code makes (checked by e2e). */}}
{{- define "hollo-operator.rules" -}}
- apiGroups: ["hollo.social"]
  resources: ["hollos"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["hollo.social"]
  resources: ["hollos/status"]
  verbs: ["get", "patch"]
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["apps"]
  resources: ["deployments/scale"]
  verbs: ["get", "patch"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["pods/log"]
  verbs: ["get"]
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["batch"]
  resources: ["cronjobs"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["autoscaling"]
  resources: ["horizontalpodautoscalers"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["keda.sh"]
  resources: ["scaledobjects"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["gateway.networking.k8s.io"]
  resources: ["httproutes"]
  verbs: ["list", "create", "patch", "delete"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- /* One GET each per reconcile: the Secrets a Hollo puts into its pods' environment
     (hashed into the pod template so a rotation rolls the pods; the CloudNativePG
     application Secret and the upstream SECRET_KEY also checked; never copied) and the
     spec.admin password Secret (its keys only), and the CloudNativePG Cluster's
     max_connections. create: the SECRET_KEY Secret the operator generates for a Hollo that
     names none (once; never updated). No list or watch unless watchSecrets (a metadata-only
     watch; a GET only when a Secret changed): by default the operator cannot enumerate
     Secrets. */}}
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "create"{{- include "hollo-operator.secretWatchVerbs" . }}]
- apiGroups: ["postgresql.cnpg.io"]
  resources: ["clusters"]
  verbs: ["get"]
{{- /* spec.upgrade.backup (issue 34 item 4): the Backup before migrating, read by name. */}}
- apiGroups: ["postgresql.cnpg.io"]
  resources: ["backups"]
  verbs: ["get", "create", "patch"]
{{- end -}}

{{/* watchSecrets (issue 36 item 4): Secrets watched, metadata only. */}}
{{- define "hollo-operator.secretWatchVerbs" -}}
{{- if .Values.watchSecrets }}, "list", "watch"{{ end -}}
{{- end -}}
