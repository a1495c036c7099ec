# Hetzner Cloud servers booted from a Talos image (snapshot) with the machine config as user_data.
# Credentials: HCLOUD_TOKEN in the environment.

terraform {
  required_version = ">= 1.4"
  required_providers {
    hcloud = {
      source  = "hetznercloud/hcloud"
      version = ">= 1.45"
    }
  }
}

variable "cluster_name" {
  type = string
}

variable "machines" {
  description = "name => machine; user_data is the Talos machine config (secret)."
  type = map(object({
    role      = string
    user_data = string
    size      = optional(string)
    image     = optional(string)
    location  = optional(string)
  }))
  sensitive = true
}

variable "default_size" {
  description = "Server type when a machine has no size, e.g. cx22."
  type        = string
  default     = "cx22"
}

variable "default_image" {
  description = "Image or snapshot id holding Talos when a machine has no image."
  type        = string
  default     = null
}

variable "location" {
  type    = string
  default = "nbg1"
}

variable "enable_ipv4" {
  description = "A public IPv4 costs extra on Hetzner; IPv6 is always on."
  type        = bool
  default     = true
}

variable "firewall_ids" {
  type    = list(number)
  default = []
}

variable "labels" {
  type    = map(string)
  default = {}
}

locals {
  names = toset(nonsensitive(keys(var.machines)))
  spec = {
    for name in local.names : name => {
      role     = nonsensitive(var.machines[name].role)
      size     = coalesce(nonsensitive(var.machines[name].size), var.default_size)
      image    = coalesce(nonsensitive(var.machines[name].image), var.default_image)
      location = coalesce(nonsensitive(var.machines[name].location), var.location)
    }
  }
}

resource "hcloud_server" "machine" {
  for_each = local.names

  name         = "${var.cluster_name}-${each.key}"
  server_type  = local.spec[each.key].size
  image        = local.spec[each.key].image
  location     = local.spec[each.key].location
  user_data    = var.machines[each.key].user_data
  firewall_ids = var.firewall_ids
  labels = merge(var.labels, {
    "rezus.cloud/cluster" = var.cluster_name
    "rezus.cloud/role"    = local.spec[each.key].role
  })

  public_net {
    ipv4_enabled = var.enable_ipv4
    ipv6_enabled = true
  }

  lifecycle {
    # Later config changes reach the node through the Talos API, not by recreating it.
    ignore_changes = [user_data, image]
  }
}

output "machines" {
  description = "name => { ipv4, ipv6 }"
  value = {
    for name, s in hcloud_server.machine : name => {
      ipv4 = s.ipv4_address != "" ? s.ipv4_address : null
      ipv6 = s.ipv6_address != "" ? s.ipv6_address : null
    }
  }
}
