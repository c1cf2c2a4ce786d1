{{/* The name of every object: "gangcheck" for a release named gangcheck (the kustomize names). */}}
{{- define "gangcheck.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gangcheck.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels on every object: the kustomize base's two, plus Helm's standard ones. */}}
{{- define "gangcheck.labels" -}}
app.kubernetes.io/name: {{ include "gangcheck.name" . }}
app.kubernetes.io/part-of: gangcheck
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/* The pods' labels and the selector of the Deployment, Service and PDB (as in the base). */}}
{{- define "gangcheck.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gangcheck.name" . }}
app.kubernetes.io/component: webhook
{{- end -}}

{{- define "gangcheck.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The Secret the pods mount: the user's in existingSecret mode, else <fullname>-tls. */}}
{{- define "gangcheck.tlsSecret" -}}
{{- if eq .Values.certificates.mode "existingSecret" -}}
{{- .Values.certificates.existingSecret.name -}}
{{- else -}}
{{- printf "%s-tls" (include "gangcheck.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* Namespaces neither webhook is called for (and the policy exempts): the policy's, plus the release's. */}}
{{- define "gangcheck.exemptNamespaces" -}}
{{- concat .Values.policy.exemptNamespaces (list .Release.Namespace) | uniq | toJson -}}
{{- end -}}

{{/*
selfSigned mode: the CA and serving certificate, generated once. On upgrade `lookup` reads the
release's Secret back and reuses it, so `helm upgrade` does not rotate the certificate (and the
caBundle stays the CA that signed it). `helm template` and `--dry-run` have no cluster, so they
always show a fresh pair. Result: a dict {ca, crt, key} of PEM strings. Computed once per render
and kept in .Values (templates render separately, each would generate its own pair otherwise).
*/}}
{{- define "gangcheck.selfSignedPair" -}}
{{- if not (hasKey .Values "_selfSigned") -}}
{{- $secretName := include "gangcheck.tlsSecret" . -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace $secretName -}}
{{- $data := dict -}}
{{- if $existing -}}{{- $data = $existing.data | default dict -}}{{- end -}}
{{- if and (index $data "ca.crt") (index $data "tls.crt") (index $data "tls.key") -}}
{{- $_ := set .Values "_selfSigned" (dict "ca" (index $data "ca.crt" | b64dec) "crt" (index $data "tls.crt" | b64dec) "key" (index $data "tls.key" | b64dec)) -}}
{{- else -}}
{{- $fullname := include "gangcheck.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $days := int .Values.certificates.selfSigned.validityDays -}}
{{- $ca := genCA (printf "%s-ca" $fullname) $days -}}
{{- $sans := list $fullname (printf "%s.%s" $fullname $ns) (printf "%s.%s.svc" $fullname $ns) (printf "%s.%s.svc.cluster.local" $fullname $ns) -}}
{{- $cert := genSignedCert (printf "%s.%s.svc" $fullname $ns) nil $sans $days $ca -}}
{{- $_ := set .Values "_selfSigned" (dict "ca" $ca.Cert "crt" $cert.Cert "key" $cert.Key) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The caBundle of both webhook configurations (base64 PEM), or nothing (cert-manager injects it). */}}
{{- define "gangcheck.caBundle" -}}
{{- if eq .Values.certificates.mode "selfSigned" -}}
{{- include "gangcheck.selfSignedPair" . -}}
{{- .Values._selfSigned.ca | b64enc -}}
{{- else if eq .Values.certificates.mode "existingSecret" -}}
{{- .Values.certificates.existingSecret.caBundle -}}
{{- end -}}
{{- end -}}

{{/* metadata.annotations of both webhook configurations in certManager mode. */}}
{{- define "gangcheck.webhookAnnotations" -}}
{{- if eq .Values.certificates.mode "certManager" }}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "gangcheck.fullname" . }}-serving
{{- end -}}
{{- end -}}
