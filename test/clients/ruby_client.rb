# Ruby's kubeclient (Debian's ruby-kubeclient) against a kube-sim server.
#
# Run by test/ruby-client.test.ts as `/usr/bin/ruby ruby_client.rb MODE KUBECONFIG NAMESPACE`; each mode does what a
# user's script would and prints one JSON document of what it saw, for the test to judge.

require 'json'
require 'kubeclient'

def client(kubeconfig, path = '', version = 'v1')
  context = Kubeclient::Config.read(kubeconfig).context
  Kubeclient::Client.new(
    "#{context.api_endpoint}#{path}", version,
    ssl_options: context.ssl_options, auth_options: context.auth_options
  )
end

def error_of(e)
  { 'class' => e.class.name, 'code' => e.error_code, 'message' => e.message }
end

def config_map(name, namespace, data, labels = nil)
  metadata = { name: name, namespace: namespace }
  metadata[:labels] = labels if labels
  Kubeclient::Resource.new(metadata: metadata, data: data)
end

def applied_config_map(name, namespace, data)
  { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: name, namespace: namespace }, data: data }
end

def crud(core, kubeconfig, ns)
  out = {}
  created = core.create_config_map(config_map('settings', ns, { mode: 'fast' }, { app: 'rb' }))
  out['created'] = [created.kind, created.metadata.name, created.data.to_h]
  got = core.get_config_map('settings', ns)
  out['got'] = got.data.to_h
  out['listed'] = core.get_config_maps(namespace: ns, label_selector: 'app=rb').map { |c| c.metadata.name }
  got.data.mode = 'slow'
  out['updated'] = core.update_config_map(got).data.to_h
  out['strategic'] = core.patch_config_map('settings', { data: { size: 'big' } }, ns).data.to_h
  out['merge'] = core.merge_patch_config_map('settings', { data: { size: nil } }, ns).data.to_h
  out['json'] = core.json_patch_config_map('settings', [{ op: 'add', path: '/data/extra', value: '1' }], ns).data.to_h
  # apply_* sends the resource as given: a Hash with apiVersion and kind (a Kubeclient::Resource has no to_json).
  applied = core.apply_config_map(applied_config_map('settings', ns, { mode: 'applied' }), field_manager: 'rb-apply')
  out['applied'] = [applied.data.to_h, applied.metadata.managedFields.map(&:manager)]
  # A group other than core: a Deployment the simulated controllers roll out.
  apps = client(kubeconfig, '/apis/apps')
  deployment = apps.create_deployment(Kubeclient::Resource.new(
    metadata: { name: 'web', namespace: ns },
    spec: {
      replicas: 2,
      selector: { matchLabels: { app: 'web' } },
      template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'web', image: 'nginx' }] } }
    }
  ))
  out['deploymentStatusOnCreate'] = deployment.status&.to_h
  ready = nil
  100.times do
    ready = apps.get_deployment('web', ns).status.readyReplicas
    break if ready == 2
    sleep 0.1
  end
  out['deploymentReady'] = ready
  out['pods'] = core.get_pods(namespace: ns, label_selector: 'app=web').map { |p| p.status.phase }
  deleted = core.delete_config_map('settings', ns, delete_options: { propagationPolicy: 'Background' })
  out['deleted'] = [deleted.kind, deleted.status, deleted.details.name, deleted.details.kind]
  begin
    core.get_config_map('settings', ns)
  rescue Kubeclient::HttpError => e
    out['afterDelete'] = error_of(e)
  end
  out
end

def watch(core, _kubeconfig, ns)
  core.create_config_map(config_map('watched', ns, { k: '1' }, { app: 'rb' }))
  core.create_config_map(config_map('other', ns, { k: '1' }))
  rv = core.get_config_maps(namespace: ns).resourceVersion
  writer = Thread.new do
    sleep 0.2
    core.patch_config_map('other', { data: { k: '2' } }, ns)
    core.patch_config_map('watched', { data: { k: '2' } }, ns)
    core.create_config_map(config_map('late', ns, { k: '1' }, { app: 'rb' }))
    core.delete_config_map('watched', ns)
  end
  selected = []
  stream = core.watch_config_maps(namespace: ns, label_selector: 'app=rb', resource_version: rv)
  stream.each do |notice|
    selected << [notice.type, notice.object.metadata.name, notice.object.data.to_h]
    break if notice.type == 'DELETED'
  end
  stream.finish
  writer.join
  # One object by name (kubeclient's /watch/namespaces/NS/configmaps/NAME), from the start: ADDED, then changes.
  named = []
  core.watch_config_maps(namespace: ns, name: 'late', as: :raw) do |line|
    event = JSON.parse(line)
    named << [event['type'], event['object']['metadata']['name'], event['object']['data']]
    if named.length == 1
      Thread.new { core.patch_config_map('late', { data: { k: 'last' } }, ns) }
    elsif event['type'] == 'MODIFIED'
      break
    end
  end
  { 'selected' => selected, 'named' => named }
end

def errors(core, _kubeconfig, ns)
  out = {}
  begin
    core.get_config_map('nope', ns)
  rescue Kubeclient::HttpError => e
    out['notFound'] = error_of(e)
  end
  core.create_config_map(config_map('twice', ns, { k: '1' }))
  begin
    core.create_config_map(config_map('twice', ns, { k: '1' }))
  rescue Kubeclient::HttpError => e
    out['alreadyExists'] = error_of(e)
  end
  begin
    core.create_config_map(config_map('Bad_Name', ns, {}))
  rescue Kubeclient::HttpError => e
    out['invalid'] = error_of(e)
  end
  begin
    core.apply_config_map(applied_config_map('twice', ns, { k: 'mine' }), field_manager: 'rb-apply', force: false)
  rescue Kubeclient::HttpError => e
    out['applyConflict'] = error_of(e)
  end
  # A Kubeclient::Resource given to apply_* goes out as a JSON string (its #to_s).
  begin
    core.apply_config_map(config_map('twice', ns, { k: 'mine' }), field_manager: 'rb-apply')
  rescue Kubeclient::HttpError => e
    out['applyNotAnObject'] = error_of(e)
  end
  out
end

MODES = { 'crud' => method(:crud), 'watch' => method(:watch), 'errors' => method(:errors) }.freeze

mode, kubeconfig, namespace = ARGV
puts JSON.generate(MODES.fetch(mode).call(client(kubeconfig), kubeconfig, namespace))
